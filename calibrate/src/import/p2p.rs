//! GPU-to-GPU bandwidth and latency matrices printed by CUDA samples'
//! `p2pBandwidthLatencyTest` and by `nvbandwidth`.
//!
//! Both print a title line, a column header of device indices (`   D\D     0      1` in
//! p2pBandwidthLatencyTest, `   GPU     0` / `   CPU     0` for its latency matrices, plain
//! `           0         1` in nvbandwidth), then one row per device: its index and one value per
//! column (`N/A` on nvbandwidth's diagonal). Format sources: NVIDIA/cuda-samples
//! `Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu` (printf calls)
//! and NVIDIA/nvbandwidth `output.cpp`.

use std::path::Path;

use crate::error::{read_text, ImportError};

/// One matrix: `values[row][column]`, `None` where the tool printed `N/A`.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// The title line above it, e.g. `Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)`.
    pub title: String,
    /// `GB/s` or `us`, read from the title.
    pub unit: String,
    pub values: Vec<Vec<Option<f64>>>,
    /// 1-based line of the column header.
    pub line: usize,
}

impl Matrix {
    pub fn is_bidirectional(&self) -> bool {
        self.title.to_ascii_lowercase().contains("bidirectional") || self.title.contains("<->")
    }
    pub fn is_latency(&self) -> bool {
        self.unit == "us"
    }
    /// Mean of the off-diagonal entries.
    pub fn off_diagonal_mean(&self) -> Option<f64> {
        let v: Vec<f64> = self
            .values
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                r.iter()
                    .enumerate()
                    .filter(move |(j, _)| *j != i)
                    .filter_map(|(_, x)| *x)
            })
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

pub fn load(path: &Path) -> Result<Vec<Matrix>, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

fn header_columns(line: &str) -> Option<(Option<&str>, usize)> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let (label, nums) = match t.first() {
        Some(&"D\\D") | Some(&"GPU") | Some(&"CPU") => (Some(t[0]), &t[1..]),
        _ => (None, &t[..]),
    };
    if nums.is_empty()
        || nums
            .iter()
            .enumerate()
            .any(|(i, n)| n.parse::<usize>() != Ok(i))
    {
        return None;
    }
    Some((label, nums.len()))
}

/// Parses every matrix in the text; an error if none is found or a matrix is cut short.
pub fn parse(text: &str, file: &str) -> Result<Vec<Matrix>, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut title = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let Some((label, n)) = header_columns(line) else {
            if !line.is_empty() && !line.starts_with(|c: char| c.is_ascii_digit()) {
                title = line.to_string();
            }
            i += 1;
            continue;
        };
        let header_line = i + 1;
        let mut values = Vec::new();
        for r in 0..n {
            let lineno = header_line + 1 + r;
            let row = lines.get(lineno - 1).map(|l| l.trim()).unwrap_or("");
            let t: Vec<&str> = row.split_whitespace().collect();
            let expected = || {
                format!("row {r} of the {n}x{n} matrix under line {header_line}: the index {r} then {n} numbers or N/A")
            };
            if t.len() < n + 1 || t[0].parse::<usize>() != Ok(r) {
                return Err(ImportError::at(file, lineno, expected()));
            }
            let mut row_vals = Vec::with_capacity(n);
            for v in &t[1..=n] {
                row_vals.push(match *v {
                    "N/A" | "n/a" => None,
                    s => Some(
                        s.parse::<f64>()
                            .map_err(|_| ImportError::at(file, lineno, expected()))?,
                    ),
                });
            }
            values.push(row_vals);
        }
        let mut t = title.clone();
        if label == Some("CPU") {
            t += " (CPU)";
        }
        let unit = if t.contains("(us)")
            || label == Some("CPU")
            || t.to_ascii_lowercase().contains("latency")
        {
            "us"
        } else {
            "GB/s"
        };
        out.push(Matrix {
            title: t,
            unit: unit.into(),
            values,
            line: header_line,
        });
        i = header_line + n;
    }
    if out.is_empty() {
        return Err(ImportError::whole(file, "a p2pBandwidthLatencyTest or nvbandwidth matrix: a title, a header of device indices `D\\D 0 1 ...`, then one row per device"));
    }
    Ok(out)
}
