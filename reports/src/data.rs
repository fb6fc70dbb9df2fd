//! Reading result tables with polars: sweep results (`results.csv` / `results.parquet`), the
//! per-run CSV files, validation tables; and merging sweep points into Parquet.

use std::path::{Path, PathBuf};

use polars::prelude::*;

/// Reads a CSV (header row, types inferred from the whole file) or Parquet file.
pub fn read_table(path: &Path) -> Result<DataFrame, String> {
    let err = |e: PolarsError| format!("{}: {e}", path.display());
    if path.extension().is_some_and(|x| x == "parquet") {
        let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        ParquetReader::new(f).finish().map_err(err)
    } else {
        CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(None)
            .try_into_reader_with_file_path(Some(path.to_path_buf()))
            .map_err(err)?
            .finish()
            .map_err(err)
    }
}

pub fn has(df: &DataFrame, name: &str) -> bool {
    df.get_column_names().iter().any(|c| c.as_str() == name)
}

/// A column as numbers (`None` where empty or not a number).
pub fn f64s(df: &DataFrame, name: &str) -> Vec<Option<f64>> {
    let Ok(c) = df.column(name) else {
        return vec![None; df.height()];
    };
    match c.cast(&DataType::Float64) {
        Ok(c) => match c.f64() {
            Ok(ca) => (0..ca.len()).map(|i| ca.get(i)).collect(),
            Err(_) => vec![None; df.height()],
        },
        Err(_) => vec![None; df.height()],
    }
}

/// A column as text (empty where null).
pub fn strings(df: &DataFrame, name: &str) -> Vec<String> {
    let Ok(c) = df.column(name) else {
        return vec![String::new(); df.height()];
    };
    match c.cast(&DataType::String) {
        Ok(c) => match c.str() {
            Ok(ca) => (0..ca.len())
                .map(|i| ca.get(i).unwrap_or("").to_string())
                .collect(),
            Err(_) => vec![String::new(); df.height()],
        },
        Err(_) => vec![String::new(); df.height()],
    }
}

pub fn column_names(df: &DataFrame) -> Vec<String> {
    df.get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// Merges the points of sweep directories (as `dtsim merge`) and writes `results.csv` and
/// `results.parquet` into `out_dir`; returns (rows, missing points, paths written).
pub fn merge_to_parquet(
    dirs: &[PathBuf],
    out_dir: &Path,
) -> Result<(usize, usize, Vec<PathBuf>), String> {
    let m = sim::scenario::sweep::merge(dirs).map_err(|e| format!("{e:#}"))?;
    let csv = out_dir.join("results.csv");
    sim::metrics::output::write_atomic(&csv, sim::scenario::sweep::results_csv(&m).as_bytes())
        .map_err(|e| format!("{}: {e}", csv.display()))?;
    let mut df = read_table(&csv)?;
    let pq = out_dir.join("results.parquet");
    let tmp = out_dir.join(format!(".results.parquet.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        ParquetWriter::new(&mut f)
            .finish(&mut df)
            .map_err(|e| format!("{}: {e}", pq.display()))?;
        f.sync_all()
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &pq).map_err(|e| format!("{}: {e}", pq.display()))?;
    Ok((m.rows.len(), m.missing.len(), vec![csv, pq]))
}
