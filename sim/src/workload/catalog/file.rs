//! Model files: users' own networks as a TOML list of layers with their FLOPs and sizes.

use std::path::Path;

use serde::Deserialize;

use super::{Layer, LayerKind, Model, ModelError};

/// A model file: a list of layers, so users bring their own networks.
///
/// ```toml
/// name = "mlp"
/// input_elements = 784
/// [[layer]]
/// name = "fc1"
/// kind = "linear"            # conv | linear | norm | activation | pool | add | embedding |
/// params = 200960            #   head | attention_block | mlp_block
/// forward_flops = 401408     # per sample, a multiply-add counts 2
/// output_elements = 256      # per sample
/// # param_tensors = 2        # default: 2 when params > 0
/// # saved_elements = 256     # default: output_elements
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    name: String,
    input_elements: u64,
    #[serde(default)]
    tokens_per_sample: Option<u64>,
    layer: Vec<LayerEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerEntry {
    name: String,
    kind: LayerKind,
    #[serde(default)]
    params: u64,
    #[serde(default)]
    param_tensors: Option<u32>,
    forward_flops: u64,
    output_elements: u64,
    #[serde(default)]
    saved_elements: Option<u64>,
}

/// Reads a model file (see `ModelFile`'s format above).
pub fn load_model_file(path: &Path) -> Result<Model, ModelError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ModelError {
        origin: origin.clone(),
        field: "(file)".into(),
        expected: format!("a readable model file ({e})"),
    })?;
    parse_model_file(&text, &origin)
}

/// Like [`load_model_file`] with the text given.
pub fn parse_model_file(text: &str, origin: &str) -> Result<Model, ModelError> {
    let f: ModelFile = toml::from_str(text).map_err(|e| ModelError {
        origin: origin.to_string(),
        field: "(model file)".into(),
        expected: e
            .message()
            .lines()
            .next()
            .unwrap_or("valid TOML")
            .to_string(),
    })?;
    if f.layer.is_empty() {
        return Err(ModelError {
            origin: origin.to_string(),
            field: "layer".into(),
            expected: "at least one [[layer]]".into(),
        });
    }
    let mut input = f.input_elements;
    let layers = f
        .layer
        .into_iter()
        .map(|e| {
            let l = Layer {
                name: e.name,
                kind: e.kind,
                params: e.params,
                param_tensors: e.param_tensors.unwrap_or(if e.params > 0 { 2 } else { 0 }),
                forward_flops: e.forward_flops,
                input_elems: input,
                output_elems: e.output_elements,
                saved_elems: e.saved_elements.unwrap_or(e.output_elements),
                gemms: Vec::new(),
                elementwise_elems: 0,
                kv_elems: 0,
                kv_heads: 0,
                flash_attention: false,
                stored_score_elems: 0,
            };
            input = e.output_elements;
            l
        })
        .collect();
    Ok(Model {
        name: f.name,
        layers,
        input_elems: f.input_elements,
        tokens_per_sample: f.tokens_per_sample,
        moe: None,
        tied_embedding_params: 0,
    })
}
