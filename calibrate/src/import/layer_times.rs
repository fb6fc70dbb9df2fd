//! Per-layer forward and backward times measured by `calibrate/scripts/torch_bench.py`
//! (`layer_times.csv`: each leaf module of a torchvision model run alone at its real input shape)
//! and their alignment with dtsim's catalog model of the same name.
//!
//! Alignment walks both lists in execution order. A PyTorch module type maps to a catalog layer
//! kind (`Conv2d` → conv, `Linear` → linear, `BatchNorm2d` → norm, `ReLU` → activation, pooling
//! → pool); `Dropout`, `Flatten` and `Identity` have no catalog layer and are skipped, and catalog
//! layers no module computes (residual additions, concatenations) are left to the model. Every
//! matched pair must agree on kind and parameter count, so a model that differs from the catalog
//! is refused with the first row that disagrees rather than silently mislabelled.

use std::path::Path;

use sim::workload::catalog::{LayerKind, Model};

use crate::error::ImportError;

/// One measured module call.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRow {
    /// 1-based line in the file.
    pub line: usize,
    pub model: String,
    pub batch: u64,
    pub module: String,
    pub module_type: String,
    pub params: u64,
    pub forward_secs: f64,
    pub backward_secs: f64,
    pub dtype: Option<String>,
}

/// A measured time attached to a catalog layer.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignedLayer {
    pub layer: String,
    pub module: String,
    pub batch: u64,
    pub forward_secs: f64,
    pub backward_secs: f64,
}

pub fn load(path: &Path) -> Result<Vec<LayerRow>, ImportError> {
    let file = path.display().to_string();
    let rows = sim::validate::read_csv(path).map_err(|e| ImportError::whole(&file, e))?;
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let line = i + 2;
            let text = |c: &str| {
                r.get(c)
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| ImportError::at(&file, line, format!("a value in column `{c}`")))
            };
            let number = |c: &str| {
                let v = text(c)?;
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        ImportError::at(&file, line, format!("`{c}` a number ≥ 0, got {v:?}"))
                    })
            };
            let batch = number("batch")?;
            if batch < 1.0 || batch.fract() != 0.0 {
                return Err(ImportError::at(&file, line, "`batch` a whole number ≥ 1"));
            }
            Ok(LayerRow {
                line,
                model: text("model")?,
                batch: batch as u64,
                module: text("module")?,
                module_type: text("type")?,
                params: number("params")? as u64,
                forward_secs: number("forward_secs")?,
                backward_secs: number("backward_secs")?,
                dtype: r
                    .get("dtype")
                    .map(|d| d.trim().to_string())
                    .filter(|d| !d.is_empty()),
            })
        })
        .collect()
}

/// The catalog kind a PyTorch module type computes; `None` for modules the catalog folds away.
fn kind_of(module_type: &str) -> Option<Option<LayerKind>> {
    Some(match module_type {
        "Conv2d" => Some(LayerKind::Conv),
        "Linear" => Some(LayerKind::Linear),
        "BatchNorm2d" | "LayerNorm" | "GroupNorm" => Some(LayerKind::Norm),
        "ReLU" | "GELU" | "SiLU" => Some(LayerKind::Activation),
        "MaxPool2d" | "AvgPool2d" | "AdaptiveAvgPool2d" => Some(LayerKind::Pool),
        "Dropout" | "Flatten" | "Identity" => None,
        _ => return None,
    })
}

/// Catalog layers with no PyTorch module of their own.
fn moduleless(kind: LayerKind) -> bool {
    matches!(kind, LayerKind::Add)
}

/// Aligns one (model, batch)'s rows, in file order, with `model`'s layers.
pub fn align(
    model: &Model,
    rows: &[&LayerRow],
    file: &str,
) -> Result<Vec<AlignedLayer>, ImportError> {
    let mut out = Vec::new();
    let mut next = 0;
    for r in rows {
        let kind = match kind_of(&r.module_type) {
            Some(Some(k)) => k,
            Some(None) => continue,
            None => {
                return Err(ImportError::at(
                    file,
                    r.line,
                    format!(
                        "a module type dtsim's catalog models (Conv2d, Linear, BatchNorm2d, ReLU, \
                         pooling; Dropout/Flatten/Identity skipped), got {:?}",
                        r.module_type
                    ),
                ))
            }
        };
        while next < model.layers.len() && moduleless(model.layers[next].kind) {
            next += 1;
        }
        let Some(layer) = model.layers.get(next) else {
            return Err(ImportError::at(
                file,
                r.line,
                format!(
                    "no more than {} layers for {} (module {} has no catalog layer left)",
                    model.layers.len(),
                    model.name,
                    r.module
                ),
            ));
        };
        if layer.kind != kind || layer.params != r.params {
            return Err(ImportError::at(
                file,
                r.line,
                format!(
                    "module {} ({}, {} parameters) to match {}'s layer {} ({:?}, {} parameters): \
                     the measured model is not the catalog's",
                    r.module,
                    r.module_type,
                    r.params,
                    model.name,
                    layer.name,
                    layer.kind,
                    layer.params
                ),
            ));
        }
        out.push(AlignedLayer {
            layer: layer.name.clone(),
            module: r.module.clone(),
            batch: r.batch,
            forward_secs: r.forward_secs,
            backward_secs: r.backward_secs,
        });
        next += 1;
    }
    if let Some(missed) = model.layers[next.min(model.layers.len())..]
        .iter()
        .find(|l| !moduleless(l.kind))
    {
        return Err(ImportError::whole(
            file,
            format!(
                "a measurement of every layer of {}: none for {} and after",
                model.name, missed.name
            ),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::workload::catalog;

    fn row(line: usize, module: &str, ty: &str, params: u64) -> LayerRow {
        LayerRow {
            line,
            model: "alexnet".into(),
            batch: 4,
            module: module.into(),
            module_type: ty.into(),
            params,
            forward_secs: line as f64 * 1e-3,
            backward_secs: line as f64 * 2e-3,
            dtype: None,
        }
    }

    /// torchvision's AlexNet leaf modules in forward order, with their parameter counts.
    fn alexnet_rows() -> Vec<LayerRow> {
        let m = [
            ("features.0", "Conv2d", 23_296),
            ("features.1", "ReLU", 0),
            ("features.2", "MaxPool2d", 0),
            ("features.3", "Conv2d", 307_392),
            ("features.4", "ReLU", 0),
            ("features.5", "MaxPool2d", 0),
            ("features.6", "Conv2d", 663_936),
            ("features.7", "ReLU", 0),
            ("features.8", "Conv2d", 884_992),
            ("features.9", "ReLU", 0),
            ("features.10", "Conv2d", 590_080),
            ("features.11", "ReLU", 0),
            ("features.12", "MaxPool2d", 0),
            ("avgpool", "AdaptiveAvgPool2d", 0),
            ("classifier.0", "Dropout", 0),
            ("classifier.1", "Linear", 37_752_832),
            ("classifier.2", "ReLU", 0),
            ("classifier.3", "Dropout", 0),
            ("classifier.4", "Linear", 16_781_312),
            ("classifier.5", "ReLU", 0),
            ("classifier.6", "Linear", 4_097_000),
        ];
        m.iter()
            .enumerate()
            .map(|(i, (n, t, p))| row(i + 2, n, t, *p))
            .collect()
    }

    #[test]
    fn torchvision_alexnet_modules_align_with_the_catalog_skipping_dropout() {
        let rows = alexnet_rows();
        let refs: Vec<&LayerRow> = rows.iter().collect();
        let a = align(&catalog::alexnet(), &refs, "layer_times.csv").unwrap();
        assert_eq!(a.len(), catalog::alexnet().layers.len());
        assert_eq!(a[16].layer, "classifier.4");
        assert_eq!(a[16].module, "classifier.4");
        assert_eq!(a[0].forward_secs, 2e-3);
    }

    #[test]
    fn a_model_that_differs_from_the_catalog_is_refused_at_the_first_mismatch() {
        let mut rows = alexnet_rows();
        rows[3].params = 1; // features.3
        let refs: Vec<&LayerRow> = rows.iter().collect();
        let e = align(&catalog::alexnet(), &refs, "x.csv").unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(e.expected.contains("features.3"), "{e}");
    }

    #[test]
    fn a_truncated_measurement_names_the_first_layer_left_out() {
        let rows = alexnet_rows();
        let refs: Vec<&LayerRow> = rows[..10].iter().collect();
        let e = align(&catalog::alexnet(), &refs, "x.csv").unwrap_err();
        assert!(e.expected.contains("features.10"), "{e}");
    }

    #[test]
    fn resnet_residual_additions_are_left_to_the_model() {
        // One bottleneck block's modules as torchvision calls them: one ReLU module thrice.
        let model = catalog::resnet(50, 1000);
        let rows: Vec<LayerRow> = model
            .layers
            .iter()
            .filter(|l| l.kind != LayerKind::Add)
            .enumerate()
            .map(|(i, l)| {
                let ty = match l.kind {
                    LayerKind::Conv => "Conv2d",
                    LayerKind::Linear => "Linear",
                    LayerKind::Norm => "BatchNorm2d",
                    LayerKind::Activation => "ReLU",
                    _ => "MaxPool2d",
                };
                row(i + 2, &l.name, ty, l.params)
            })
            .collect();
        let refs: Vec<&LayerRow> = rows.iter().collect();
        let a = align(&model, &refs, "x.csv").unwrap();
        assert_eq!(a.len(), rows.len());
        assert!(a.iter().all(|x| !x.layer.ends_with(".add")));
    }
}
