//! Transformers from their configuration (BERT, GPT, Llama, Mixtral): the embedding, per layer
//! an attention block and an MLP (or mixture-of-experts) block with their GEMMs, saved
//! activations and elementwise traffic, the final norm, pooler and head.

use serde::Deserialize;

use super::{BatchAxis, GemmShape, Layer, LayerKind, Model, MoeShape};

/// A transformer encoder (BERT) or decoder-only (GPT) model.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerConfig {
    #[serde(default = "default_transformer_name")]
    pub name: String,
    pub layers: u32,
    pub hidden: u64,
    pub heads: u64,
    /// Feed-forward width; default 4 × hidden.
    #[serde(default)]
    pub ffn: Option<u64>,
    /// Tokens per sample.
    pub sequence: u64,
    pub vocabulary: u64,
    /// Learned position embeddings; default = sequence.
    #[serde(default)]
    pub max_positions: Option<u64>,
    /// Token-type embeddings (BERT: 2; GPT: 0).
    #[serde(default)]
    pub token_types: u64,
    /// BERT's pooler (a hidden×hidden linear layer on the first token).
    #[serde(default)]
    pub pooler: bool,
    /// A final layer norm after the last block (GPT).
    #[serde(default)]
    pub final_norm: bool,
    /// Layer norm right after the embeddings (BERT).
    #[serde(default)]
    pub embedding_norm: bool,
    /// Output projection onto the vocabulary with weights tied to the embedding (FLOPs, no
    /// extra parameters).
    #[serde(default)]
    pub tied_lm_head: bool,
    /// Output projection onto the vocabulary with weights of its own (Llama).
    #[serde(default)]
    pub untied_lm_head: bool,
    /// Key/value heads (grouped-query attention); default = heads.
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// A gated MLP (SwiGLU: gate, up and down projections) instead of two linear layers.
    #[serde(default)]
    pub gated_mlp: bool,
    /// RMSNorm (one weight vector) instead of LayerNorm (weight and bias).
    #[serde(default)]
    pub rms_norm: bool,
    /// Biases on the linear layers (GPT, BERT); Llama has none.
    #[serde(default = "yes")]
    pub bias: bool,
    /// Attention computed without storing the s × s scores (FlashAttention): saved activations
    /// drop the 5·a·s² term.
    #[serde(default)]
    pub flash_attention: bool,
    /// Experts per MLP block (mixture of experts); 0 for a dense model.
    #[serde(default)]
    pub experts: u64,
    /// Experts each token is routed to (top-k), for a mixture of experts.
    #[serde(default = "two")]
    pub experts_per_token: u64,
}

fn two() -> u64 {
    2
}

fn yes() -> bool {
    true
}

fn default_transformer_name() -> String {
    "transformer".into()
}

impl TransformerConfig {
    /// The catalog's transformer called `name`, `None` for any other name.
    pub fn by_name(name: &str) -> Option<Self> {
        Some(match name {
            "bert_base" => Self::bert_base(),
            "bert_large" => Self::bert_large(),
            "gpt2" => Self::gpt2(),
            "gpt_1_3b" => Self::gpt_1_3b(),
            "gpt3_175b" => Self::gpt3_175b(),
            "llama3_8b" => Self::llama3_8b(),
            "llama3_70b" => Self::llama3_70b(),
            "llama3_405b" => Self::llama3_405b(),
            "mixtral_8x7b" => Self::mixtral_8x7b(),
            _ => return None,
        })
    }

    /// GPT-2 small (Hugging Face `gpt2`): 12 layers, 768 hidden, 12 heads, 1024 tokens.
    pub fn gpt2() -> Self {
        TransformerConfig {
            name: "gpt2".into(),
            layers: 12,
            hidden: 768,
            heads: 12,
            ffn: None,
            sequence: 1024,
            vocabulary: 50257,
            max_positions: Some(1024),
            token_types: 0,
            pooler: false,
            final_norm: true,
            embedding_norm: false,
            tied_lm_head: true,
            untied_lm_head: false,
            kv_heads: None,
            gated_mlp: false,
            rms_norm: false,
            bias: true,
            flash_attention: false,
            experts: 0,
            experts_per_token: 2,
        }
    }
    /// A 1.3B-parameter GPT (the GPT-3 "XL" shape: 24 layers, d_model 2048, 2048 tokens),
    /// 16 heads of 128.
    pub fn gpt_1_3b() -> Self {
        TransformerConfig {
            name: "gpt_1_3b".into(),
            layers: 24,
            hidden: 2048,
            heads: 16,
            sequence: 2048,
            max_positions: Some(2048),
            ..Self::gpt2()
        }
    }
    /// BERT-base (uncased), sequence 128 (pre-training phase 1); position table of 512.
    pub fn bert_base() -> Self {
        TransformerConfig {
            name: "bert_base".into(),
            layers: 12,
            hidden: 768,
            heads: 12,
            ffn: None,
            sequence: 128,
            vocabulary: 30522,
            max_positions: Some(512),
            token_types: 2,
            pooler: true,
            final_norm: false,
            embedding_norm: true,
            tied_lm_head: false,
            ..Self::gpt2()
        }
    }
    /// GPT-3 175B (Brown et al. 2020, Table 2.1: 96 layers, d_model 12,288, 96 heads of 128,
    /// 2,048 tokens; GPT-2's vocabulary and learned positions; tied output embedding).
    pub fn gpt3_175b() -> Self {
        TransformerConfig {
            name: "gpt3_175b".into(),
            layers: 96,
            hidden: 12288,
            heads: 96,
            sequence: 2048,
            max_positions: Some(2048),
            ..Self::gpt2()
        }
    }
    /// Llama 3 (Meta's `params.json` / Hugging Face `config.json` of Llama-3.1): RMSNorm,
    /// SwiGLU, grouped-query attention with 8 key/value heads, rotary positions (no position
    /// table), no biases, untied output projection, vocabulary 128,256; pre-training sequence
    /// 8,192 tokens, FlashAttention.
    fn llama3(name: &str, layers: u32, hidden: u64, heads: u64, ffn: u64) -> Self {
        TransformerConfig {
            name: name.into(),
            layers,
            hidden,
            heads,
            ffn: Some(ffn),
            sequence: 8192,
            vocabulary: 128_256,
            max_positions: Some(0),
            token_types: 0,
            pooler: false,
            final_norm: true,
            embedding_norm: false,
            tied_lm_head: false,
            untied_lm_head: true,
            kv_heads: Some(8),
            gated_mlp: true,
            rms_norm: true,
            bias: false,
            flash_attention: true,
            experts: 0,
            experts_per_token: 2,
        }
    }
    /// Llama-3 8B: 32 layers, hidden 4,096, 32 heads, FFN 14,336.
    pub fn llama3_8b() -> Self {
        Self::llama3("llama3_8b", 32, 4096, 32, 14336)
    }
    /// Llama-3 70B: 80 layers, hidden 8,192, 64 heads, FFN 28,672.
    pub fn llama3_70b() -> Self {
        Self::llama3("llama3_70b", 80, 8192, 64, 28672)
    }
    /// Llama-3.1 405B: 126 layers, hidden 16,384, 128 heads, FFN 53,248.
    pub fn llama3_405b() -> Self {
        Self::llama3("llama3_405b", 126, 16384, 128, 53248)
    }
    /// Mixtral 8x7B (Mistral AI's `config.json`): Llama-like blocks (32 layers, hidden 4,096,
    /// 32 heads, 8 key/value heads, SwiGLU experts of 14,336), 8 experts per block of which
    /// each token uses 2, vocabulary 32,000, sequence 4,096.
    pub fn mixtral_8x7b() -> Self {
        TransformerConfig {
            sequence: 4096,
            vocabulary: 32_000,
            experts: 8,
            experts_per_token: 2,
            ..Self::llama3("mixtral_8x7b", 32, 4096, 32, 14336)
        }
    }
    pub fn bert_large() -> Self {
        TransformerConfig {
            name: "bert_large".into(),
            layers: 24,
            hidden: 1024,
            heads: 16,
            ..Self::bert_base()
        }
    }
}

/// Builds a transformer: embeddings, then per block an attention block and an MLP block, then
/// the head. Saved activations follow Korthikanti et al. 2022 ("Reducing Activation
/// Recomputation in Large Transformer Models"): s·h·(34 + 5·a·s/h) bytes per layer and sample
/// with 16-bit activations, i.e. half that many 2-byte elements; 13·s·h + 5·a·s² of those bytes
/// belong to attention and 21·s·h to the MLP.
pub fn transformer(c: &TransformerConfig) -> Model {
    let (s, h, a) = (c.sequence, c.hidden, c.heads);
    let f = c.ffn.unwrap_or(4 * h);
    let v = c.vocabulary;
    let positions = c.max_positions.unwrap_or(s);
    // Key/value width: heads of h / a each, fewer of them with grouped-query attention.
    let kv = c.kv_heads.unwrap_or(a).min(a) * (h / a.max(1));
    let b = c.bias as u64;
    // A norm's parameters and tensors.
    let (norm_params, norm_tensors) = if c.rms_norm { (h, 1) } else { (2 * h, 2) };
    let mut layers = Vec::new();
    let emb_params = v * h + positions * h + c.token_types * h;
    let emb_norm = if c.embedding_norm { 2 * h } else { 0 };
    layers.push(Layer {
        name: "embeddings".into(),
        kind: LayerKind::Embedding,
        params: emb_params + emb_norm,
        param_tensors: 1
            + (positions > 0) as u32
            + (c.token_types > 0) as u32
            + 2 * c.embedding_norm as u32,
        forward_flops: 4 * s * h,
        input_elems: s,
        output_elems: s * h,
        saved_elems: s * h,
        gemms: Vec::new(),
        elementwise_elems: 0,
        kv_elems: 0,
        kv_heads: 0,
        flash_attention: false,
        stored_score_elems: 0,
    });
    // Saved activations per layer (Korthikanti et al.): attention 13·s·h bytes plus 5·a·s²
    // for the scores unless FlashAttention recomputes them; a plain MLP 21·s·h bytes; a gated
    // one its input and norm input (4·s·h) and its gate, up, activation and product (8·s·f).
    let attn_saved_bytes = 13 * s * h + if c.flash_attention { 0 } else { 5 * a * s * s };
    let mlp_saved_bytes = if c.gated_mlp {
        4 * s * h + 8 * s * f
    } else {
        21 * s * h
    };
    // What the blocks' kernels besides their GEMMs move forward, per sample (a norm reads and
    // writes s·h, dropout plus the residual add reads two and writes one, the activation of a
    // plain MLP reads and writes s·f, a gated one reads gate and up and writes their product;
    // stored scores are softmaxed in place of FlashAttention's fused kernel): the elementwise
    // work the GEMM times leave out. Counted at the activations' precision, as bf16 training
    // keeps them; torch.autocast keeps the residual stream in fp32 and moves more.
    let mlp_activation_elems = if c.gated_mlp { 3 * s * f } else { 2 * s * f };
    let (mlp_mats, mlp_bias) = if c.gated_mlp {
        (3, 2 * f + h)
    } else {
        (2, f + h)
    };
    for l in 0..c.layers {
        // Attention: norm + QKV (h × (h + 2·kv)) + output projection (h × h), biases if any.
        let qkv = h + 2 * kv;
        let attn_macs = s * qkv * h + 2 * s * s * h + s * h * h;
        layers.push(Layer {
            name: format!("h.{l}.attn"),
            kind: LayerKind::AttentionBlock,
            params: qkv * h + h * h + b * (qkv + h) + norm_params,
            param_tensors: 2 + 2 * b as u32 + norm_tensors,
            forward_flops: 2 * attn_macs + 5 * a * s * s,
            input_elems: s * h,
            output_elems: s * h,
            saved_elems: attn_saved_bytes / 2,
            gemms: attention_gemms(s, h, a, qkv),
            elementwise_elems: 5 * s * h + if c.flash_attention { 0 } else { 2 * a * s * s },
            kv_elems: 2 * s * kv,
            kv_heads: c.kv_heads.unwrap_or(a).min(a),
            flash_attention: c.flash_attention,
            stored_score_elems: if c.flash_attention { 0 } else { a * s * s },
        });
        let mlp_macs = mlp_mats * s * h * f;
        if c.experts > 0 {
            // A token visits k experts: k MLPs' work, plus the router (h × experts).
            let k = c.experts_per_token.min(c.experts);
            layers.push(Layer {
                name: format!("h.{l}.moe"),
                kind: LayerKind::MoeBlock,
                params: c.experts * (mlp_mats * h * f + b * mlp_bias) + h * c.experts + norm_params,
                param_tensors: c.experts as u32 * mlp_mats as u32 * (1 + b as u32)
                    + 1
                    + norm_tensors,
                forward_flops: k * (2 * mlp_macs + 8 * s * f) + 2 * s * h * c.experts,
                input_elems: s * h,
                output_elems: s * h,
                saved_elems: k * mlp_saved_bytes / 2,
                gemms: vec![
                    GemmShape::rows(s, h, c.experts, 1),
                    GemmShape::rows(k * s, (mlp_mats - 1) * f, h, 1),
                    GemmShape::rows(k * s, h, f, 1),
                ],
                elementwise_elems: 5 * s * h + k * (mlp_activation_elems + 4 * s * h),
                kv_elems: 0,
                kv_heads: 0,
                flash_attention: false,
                stored_score_elems: 0,
            });
            continue;
        }
        layers.push(Layer {
            name: format!("h.{l}.mlp"),
            kind: LayerKind::MlpBlock,
            params: mlp_mats * h * f + b * mlp_bias + norm_params,
            param_tensors: mlp_mats as u32 * (1 + b as u32) + norm_tensors,
            forward_flops: 2 * mlp_macs + 8 * s * f,
            input_elems: s * h,
            output_elems: s * h,
            saved_elems: mlp_saved_bytes / 2,
            gemms: vec![
                GemmShape::rows(s, (mlp_mats - 1) * f, h, 1),
                GemmShape::rows(s, h, f, 1),
            ],
            elementwise_elems: 5 * s * h + mlp_activation_elems,
            kv_elems: 0,
            kv_heads: 0,
            flash_attention: false,
            stored_score_elems: 0,
        });
    }
    if c.final_norm {
        layers.push(Layer {
            name: "ln_f".into(),
            kind: LayerKind::Norm,
            params: norm_params,
            param_tensors: norm_tensors,
            forward_flops: 4 * s * h,
            input_elems: s * h,
            output_elems: s * h,
            saved_elems: s * h,
            gemms: Vec::new(),
            elementwise_elems: 0,
            kv_elems: 0,
            kv_heads: 0,
            flash_attention: false,
            stored_score_elems: 0,
        });
    }
    if c.pooler {
        layers.push(Layer {
            name: "pooler".into(),
            kind: LayerKind::Linear,
            params: h * h + h,
            param_tensors: 2,
            forward_flops: 2 * h * h,
            input_elems: h,
            output_elems: h,
            saved_elems: h,
            gemms: vec![GemmShape::rows(1, h, h, 1)],
            elementwise_elems: 0,
            kv_elems: 0,
            kv_heads: 0,
            flash_attention: false,
            stored_score_elems: 0,
        });
    }
    if c.tied_lm_head || c.untied_lm_head {
        let own = c.untied_lm_head && !c.tied_lm_head;
        layers.push(Layer {
            name: "lm_head".into(),
            kind: LayerKind::Head,
            params: if own { v * h } else { 0 },
            param_tensors: own as u32,
            forward_flops: 2 * s * h * v,
            input_elems: s * h,
            output_elems: s * v,
            saved_elems: s * v,
            gemms: vec![GemmShape::rows(s, v, h, 1)],
            elementwise_elems: s * v,
            kv_elems: 0,
            kv_heads: 0,
            flash_attention: false,
            stored_score_elems: 0,
        });
    }
    Model {
        name: c.name.clone(),
        layers,
        input_elems: s,
        tokens_per_sample: Some(s),
        moe: (c.experts > 0).then_some(MoeShape {
            experts: c.experts,
            experts_per_token: c.experts_per_token.min(c.experts),
            expert_params_per_block: c.experts * (mlp_mats * h * f + b * mlp_bias),
            hidden: h,
        }),
        tied_embedding_params: if c.tied_lm_head && !c.untied_lm_head {
            v * h
        } else {
            0
        },
    }
}

/// An attention block's products per sample: the QKV projection (`qkv` outputs: `3·h`, fewer
/// with grouped-query attention), `Q·Kᵀ` and `softmax·V` per query head (`a` heads of `h / a`),
/// and the output projection: `2·(s·h·qkv + s·h² + 2·s²·h)` FLOPs.
fn attention_gemms(s: u64, h: u64, a: u64, qkv: u64) -> Vec<GemmShape> {
    let d = h / a;
    let per_head = |m, n, k| GemmShape {
        m_per_sample: m,
        n,
        k,
        count: a,
        batch_axis: BatchAxis::Count,
    };
    vec![
        GemmShape::rows(s, qkv, h, 1),
        per_head(s, s, d),
        per_head(s, d, s),
        GemmShape::rows(s, h, h, 1),
    ]
}
