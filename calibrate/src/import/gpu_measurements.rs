//! `gpu_measurements.json` of `calibrate gpu --logs DIR` (gzip allowed): the device, its copies,
//! the cuBLAS GEMM grid and every layer GEMM as timed, so that the compute section a run wrote
//! can be rebuilt later, here without a GPU, with what this version of calibrate makes of them
//! (the measured GEMM table, for one).

use std::path::Path;

use serde_json::Value;

use crate::compute::{GemmLayer, GemmTiming};
use crate::error::{read_text, ImportError};

/// What the compute section is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuMeasurements {
    pub device_name: String,
    pub memory_bytes: u64,
    /// Grid GEMMs and layer GEMMs alike.
    pub gemms: Vec<GemmTiming>,
    /// Bytes per second of the largest device-to-device copy.
    pub copy_bytes_per_s: Option<f64>,
    /// Host, driver, cuBLAS: for the provenance.
    pub origin: String,
}

pub fn load(path: &Path) -> Result<GpuMeasurements, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<GpuMeasurements, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        ImportError::whole(
            file,
            format!("the JSON `calibrate gpu --logs` writes ({e})"),
        )
    })?;
    let device = v
        .get("devices")
        .and_then(Value::as_array)
        .and_then(|d| d.first())
        .ok_or_else(|| ImportError::whole(file, "`devices[0]`: the GPU that was measured"))?;
    let device_name = device
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ImportError::whole(file, "`devices[0].name` a string"))?
        .to_string();
    let memory_bytes = device
        .get("memory_bytes")
        .and_then(Value::as_u64)
        .ok_or_else(|| ImportError::whole(file, "`devices[0].memory_bytes` a whole number"))?;
    let median = |e: &Value| {
        e.get("time")
            .and_then(|t| t.get("median_secs"))
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s > 0.0)
    };
    let mut gemms = Vec::new();
    for key in ["gemms", "layer_gemms"] {
        for (i, e) in v
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = |k: &str| format!("`{key}[{i}].{k}`");
            let whole = |k: &str| {
                e.get(k)
                    .and_then(Value::as_u64)
                    .filter(|x| *x > 0)
                    .ok_or_else(|| {
                        ImportError::whole(file, format!("{} a whole number > 0", at(k)))
                    })
            };
            let text = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| ImportError::whole(file, format!("{} a string", at(k))))
            };
            let layer = match key {
                "layer_gemms" => Some(GemmLayer {
                    model: text("model")?,
                    layer: text("layer")?,
                    batch: whole("batch")?,
                    pass: text("pass")?,
                }),
                _ => None,
            };
            gemms.push(GemmTiming {
                dtype: text("dtype")?,
                m: whole("m")?,
                n: whole("n")?,
                k: whole("k")?,
                count: e.get("count").and_then(Value::as_u64).unwrap_or(1).max(1),
                median_secs: median(e).ok_or_else(|| {
                    ImportError::whole(file, format!("{} seconds > 0", at("time.median_secs")))
                })?,
                layer,
            });
        }
    }
    if gemms.is_empty() {
        return Err(ImportError::whole(
            file,
            "GEMM timings in `gemms` or `layer_gemms` (was calibrate gpu run with --skip gemm,layers?)",
        ));
    }
    let copy_bytes_per_s = v
        .get("copies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.get("kind").and_then(Value::as_str) == Some("d2d"))
        .filter_map(|c| Some((c.get("bytes")?.as_f64()?, median(c)?)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(bytes, secs)| bytes / secs);
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    Ok(GpuMeasurements {
        device_name,
        memory_bytes,
        gemms,
        copy_bytes_per_s,
        origin: format!(
            "calibrate gpu on {} (driver {}, cuBLAS {})",
            s("host"),
            s("driver_version"),
            s("cublas_version")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"{"host": "h", "driver_version": "13.0", "cublas_version": "13.1.0",
      "devices": [{"name": "NVIDIA H200", "memory_bytes": 150109880320}],
      "copies": [{"kind": "d2d", "bytes": 1024, "time": {"median_secs": 1e-6}},
                 {"kind": "d2d", "bytes": 4096, "time": {"median_secs": 2e-6}},
                 {"kind": "h2d", "bytes": 8192, "time": {"median_secs": 1e-3}}],
      "gemms": [{"dtype": "bf16", "m": 256, "n": 256, "k": 256, "time": {"median_secs": 1e-5}}],
      "layer_gemms": [{"model": "gpt2", "layer": "h.0.mlp", "gemm": 0, "batch": 1,
        "dtype": "bf16", "pass": "forward", "m": 1024, "n": 3072, "k": 768, "count": 1,
        "time": {"median_secs": 2e-5}}]}"#;

    #[test]
    fn the_largest_device_copy_and_every_gemm_are_read() {
        let g = parse(ONE, "m.json").unwrap();
        assert_eq!(g.device_name, "NVIDIA H200");
        assert_eq!(g.copy_bytes_per_s, Some(4096.0 / 2e-6));
        assert_eq!(g.gemms.len(), 2);
        assert!(g.gemms[0].layer.is_none());
        assert_eq!(g.gemms[1].layer.as_ref().unwrap().layer, "h.0.mlp");
        assert_eq!((g.gemms[1].m, g.gemms[1].count), (1024, 1));
    }

    #[test]
    fn a_gemm_without_its_time_is_refused_naming_the_field() {
        let bad = ONE.replace(r#""time": {"median_secs": 2e-5}"#, r#""time": {}"#);
        let e = parse(&bad, "m.json").unwrap_err().to_string();
        assert!(
            e.contains("m.json") && e.contains("layer_gemms[0].time.median_secs"),
            "{e}"
        );
    }
}
