//! `device.json` of `calibrate/scripts/torch_bench.py`: one device's GEMM timings through
//! PyTorch (every convolution's and linear layer's im2col shape in forward, input gradient and
//! weight gradient, plus a square grid), a device copy rate, its name and memory, in one dtype.
//! The same inputs `calibrate gpu` gets from cuBLAS, for any device PyTorch runs on (a CPU too).

use std::path::Path;

use serde_json::Value;

use crate::compute::{GemmLayer, GemmTiming};
use crate::error::{read_text, ImportError};

/// What a `device.json` holds.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchDevice {
    pub device_name: String,
    /// `cuda` or `cpu`.
    pub device_kind: String,
    pub dtype: String,
    pub memory_bytes: u64,
    pub gemms: Vec<GemmTiming>,
    /// Bytes per second of a large device-to-device copy (each byte read and written once).
    pub copy_bytes_per_s: f64,
    /// Host, torch version, date: for the provenance.
    pub origin: String,
}

pub fn load(path: &Path) -> Result<TorchDevice, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<TorchDevice, ImportError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ImportError::whole(file, format!("the JSON torch_bench.py writes ({e})")))?;
    let field = |k: &str| {
        v.get(k).ok_or_else(|| {
            ImportError::whole(
                file,
                format!("a field `{k}` (torch_bench.py's device.json)"),
            )
        })
    };
    let text_of = |k: &str| -> Result<String, ImportError> {
        field(k)?
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ImportError::whole(file, format!("`{k}` a string")))
    };
    let dtype = text_of("dtype")?;
    let memory_bytes = field("memory_bytes")?
        .as_u64()
        .ok_or_else(|| ImportError::whole(file, "`memory_bytes` a whole number of bytes"))?;
    let gemm = |e: &Value, what: &str, i: usize| -> Result<GemmTiming, ImportError> {
        let at = |k: &str| format!("`{what}[{i}].{k}`");
        let whole = |k: &str| {
            e.get(k)
                .and_then(Value::as_u64)
                .filter(|x| *x > 0)
                .ok_or_else(|| ImportError::whole(file, format!("{} a whole number > 0", at(k))))
        };
        let secs = e
            .get("secs_median")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                ImportError::whole(file, format!("{} seconds > 0", at("secs_median")))
            })?;
        let layer = match (e.get("model"), e.get("layer")) {
            (Some(m), Some(l)) => Some(GemmLayer {
                model: m.as_str().unwrap_or_default().to_string(),
                layer: l.as_str().unwrap_or_default().to_string(),
                batch: whole("batch")?,
                pass: e
                    .get("pass")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            }),
            _ => None,
        };
        Ok(GemmTiming {
            dtype: e
                .get("dtype")
                .and_then(Value::as_str)
                .unwrap_or(&dtype)
                .to_string(),
            m: whole("m")?,
            n: whole("n")?,
            k: whole("k")?,
            count: whole("count")?,
            median_secs: secs,
            layer,
        })
    };
    let mut gemms = Vec::new();
    for key in ["layer_gemms", "gemm_grid"] {
        if let Some(list) = v.get(key).and_then(Value::as_array) {
            for (i, e) in list.iter().enumerate() {
                gemms.push(gemm(e, key, i)?);
            }
        }
    }
    if gemms.is_empty() {
        return Err(ImportError::whole(
            file,
            "GEMM timings in `layer_gemms` or `gemm_grid` (was torch_bench.py run with --no-gemm?)",
        ));
    }
    let copy = field("copy")?;
    let (bytes, secs) = (
        copy.get("bytes").and_then(Value::as_f64).unwrap_or(0.0),
        copy.get("secs_median")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
    );
    if !(bytes > 0.0 && secs > 0.0 && secs.is_finite()) {
        return Err(ImportError::whole(
            file,
            "`copy.bytes` and `copy.secs_median` > 0",
        ));
    }
    let opt = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    Ok(TorchDevice {
        device_name: text_of("device_name")?,
        device_kind: text_of("device")?,
        dtype,
        memory_bytes,
        gemms,
        copy_bytes_per_s: bytes / secs,
        origin: format!(
            "torch_bench.py on {} (host {}, torch {}, {} threads, {})",
            opt("machine"),
            opt("host"),
            opt("torch"),
            v.get("threads").and_then(Value::as_u64).unwrap_or(0),
            opt("date_utc")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GEMMs that take exactly (F + 1e9) / 1e12 seconds, copy 1 GB/s.
    fn device_json(extra: &str) -> String {
        let t = |m: u64, n: u64, k: u64| (2.0 * (m * n * k) as f64 + 1e9) / 1e12;
        format!(
            r#"{{"device": "cpu", "device_name": "Test CPU", "dtype": "fp32", "memory_bytes": 1000,
            "host": "h", "torch": "1.13", "threads": 2, "date_utc": "2026-11-22T00:00:00Z",
            "layer_gemms": [
              {{"model": "alexnet", "batch": 4, "layer": "features.0", "pass": "forward", "m": 12100, "n": 64, "k": 363, "count": 1, "dtype": "fp32", "secs_median": {}}},
              {{"model": "alexnet", "batch": 4, "layer": "features.3", "pass": "forward", "m": 2916, "n": 192, "k": 1600, "count": 1, "dtype": "fp32", "secs_median": {}}},
              {{"model": "alexnet", "batch": 4, "layer": "classifier.1", "pass": "forward", "m": 4, "n": 4096, "k": 9216, "count": 1, "dtype": "fp32", "secs_median": {}}}
            ],
            "gemm_grid": [{{"m": 256, "n": 256, "k": 256, "count": 1, "dtype": "fp32", "secs_median": 0.25}}],
            "copy": {{"bytes": 1000000000, "secs_median": 1.0}}{extra}}}"#,
            t(12100, 64, 363),
            t(2916, 192, 1600),
            t(4, 4096, 9216)
        )
    }

    #[test]
    fn a_device_file_gives_the_gemms_copy_rate_and_layers_of_the_run() {
        let d = parse(&device_json(""), "device.json").unwrap();
        assert_eq!(d.gemms.len(), 4);
        assert_eq!(d.copy_bytes_per_s, 1e9);
        assert_eq!(d.gemms[2].layer.as_ref().unwrap().layer, "classifier.1");
        assert!(d.gemms[3].layer.is_none());
        // Through compute_section: the line recovers the 1 TFLOP/s peak and F½ = 1 GFLOP.
        let prov = |s: String| sim::profile::Provenance {
            source: "measured".into(),
            detail: s,
            date: None,
        };
        let c = crate::compute::compute_section(
            &d.gemms,
            Some(d.copy_bytes_per_s),
            &d.device_name,
            d.memory_bytes,
            &prov,
        )
        .unwrap();
        let peak = c.peak_flops_per_s["fp32"].value;
        assert!((peak / 1e12 - 1.0).abs() < 1e-6, "{peak}");
        assert!((c.half_efficiency_flops.value / 1e9 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_file_without_a_copy_rate_or_with_a_bad_timing_is_refused_by_field() {
        let no_copy = device_json("").replace(
            r#""copy": {"bytes": 1000000000, "secs_median": 1.0}"#,
            r#""copy": {}"#,
        );
        let e = parse(&no_copy, "d.json").unwrap_err();
        assert!(e.expected.contains("copy.bytes"), "{e}");
        let bad = device_json("").replace(r#""secs_median": 0.25"#, r#""secs_median": -1"#);
        let e = parse(&bad, "d.json").unwrap_err();
        assert!(e.expected.contains("gemm_grid[0].secs_median"), "{e}");
    }
}
