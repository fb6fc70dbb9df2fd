//! The model catalog: networks as ordered lists of layers with exact shapes, parameter counts,
//! forward FLOPs and activation sizes, per sample. This file holds what a model is ([`Layer`],
//! [`LayerKind`], [`GemmShape`], [`Model`]) and the catalog by name; `cnn` builds the
//! convolutional networks, `transformer` the transformers from their configuration, `file`
//! reads users' model files.
//!
//! Conventions:
//! - **FLOPs count a multiply-add as two** (`forward_flops = 2 × MACs`). The "4.1 GFLOPs" commonly
//!   cited for ResNet-50 at 224×224 counts a multiply-add once, i.e. it is 4.1 GMACs; see
//!   [`Model::forward_macs`]. Only convolutions, linear layers and attention matrix products are
//!   counted as MACs; normalizations, activations, pooling and additions get their elementwise
//!   FLOPs (small) so that their time comes from memory bandwidth.
//! - The backward pass costs twice the forward FLOPs (input gradient + weight gradient), the
//!   usual approximation.
//! - Layers are in execution order. Branches (residual shortcuts, Inception branches) run one
//!   after the other, as one GPU stream runs them.
//! - Sizes are in *elements*; the workload's dtype turns them into bytes.
//! - Each layer lists its forward pass as matrix products ([`GemmShape`]): a convolution as its
//!   im2col GEMM (one per group), a linear layer as one GEMM per sample (or per token), a
//!   transformer block as its projections and its two attention products per head. Layers
//!   without matrix products list none. `calibrate gpu` times these shapes with cuBLAS.
//!
//! Reference parameter counts (asserted exactly in the tests):
//! - AlexNet 61,100,840; VGG-16 138,357,544; ResNet-18 11,689,512; ResNet-50 25,557,032;
//!   ResNet-101 44,549,160; ResNet-152 60,192,808; Inception-v3 27,161,264 (with the auxiliary
//!   classifier, torchvision's default): torchvision.models, the `num_params` of each weights
//!   entry in torchvision's model documentation (`docs.pytorch.org/vision/stable/models`).
//! - ResNet-18 for CIFAR-10 11,173,962: the widely used `kuangliu/pytorch-cifar` ResNet18
//!   (3×3 stem, no max-pool, 10 classes).
//! - BERT-base 109,482,240 and BERT-large 335,141,888 (Hugging Face `BertModel` with pooler,
//!   bert-base-uncased / bert-large-uncased configs); GPT-2 124,439,808 (Hugging Face
//!   `GPT2Model`, tied LM head not counted twice).

use serde::Deserialize;

/// What a layer does, which decides its efficiency class and whether tensor parallelism
/// splits it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    Conv,
    Linear,
    Norm,
    Activation,
    Pool,
    /// Elementwise addition (residual) or concatenation.
    Add,
    /// A transformer's token (and position) embedding: Megatron's tensor parallelism splits
    /// the vocabulary over the TP group (`VocabParallelEmbedding`) and all-reduces the rows
    /// looked up, forward only.
    Embedding,
    /// A language model's output projection onto the vocabulary, with the loss over it: split
    /// by vocabulary under tensor parallelism (a column-parallel linear whose logits stay split,
    /// Megatron's vocab-parallel cross-entropy), its input gradient all-reduced backward.
    Head,
    /// A transformer's attention block (layer norm, QKV, attention, output projection):
    /// Megatron tensor parallelism splits it with one all-reduce forward and one backward.
    AttentionBlock,
    /// A transformer's MLP block (layer norm, two linear layers): split like attention.
    MlpBlock,
    /// A mixture-of-experts MLP block (norm, router, experts of which each token uses the
    /// top k): FLOPs are those of the k experts a token visits; expert parallelism shards the
    /// experts and moves tokens to them and back with all-to-alls.
    MoeBlock,
}

impl LayerKind {
    /// Whether the layer is dominated by matrix products (vs memory-bound elementwise work).
    pub fn is_matmul(self) -> bool {
        matches!(
            self,
            LayerKind::Conv
                | LayerKind::Linear
                | LayerKind::Head
                | LayerKind::AttentionBlock
                | LayerKind::MlpBlock
                | LayerKind::MoeBlock
        )
    }

    /// Whether Megatron-style tensor parallelism splits this layer across the TP group.
    pub fn tensor_parallel(self) -> bool {
        matches!(
            self,
            LayerKind::AttentionBlock
                | LayerKind::MlpBlock
                | LayerKind::Embedding
                | LayerKind::Head
        )
    }
}

impl Layer {
    /// Elements per sample that tensor parallelism all-reduces over the TP group after this
    /// layer's forward (`forward`) or backward pass, as Megatron does: a block's row-parallel
    /// output forward and its column-parallel input gradient backward; a vocabulary-parallel
    /// embedding's rows forward only (each rank looks up its slice, zeros elsewhere); a head's
    /// input gradient backward only (its logits stay split; the loss's three all-reduces of one
    /// value per token are left out). `None` for layers tensor parallelism does not split.
    pub fn tensor_parallel_reduce_elems(&self, forward: bool) -> Option<u64> {
        match (self.kind, forward) {
            (LayerKind::AttentionBlock | LayerKind::MlpBlock, _) => Some(self.output_elems),
            (LayerKind::Embedding, true) => Some(self.output_elems),
            (LayerKind::Head, false) => Some(self.input_elems),
            _ => None,
        }
    }
}

/// Which dimension of a [`GemmShape`] the batch multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchAxis {
    /// The rows: the samples' rows stack into one taller GEMM (im2col rows, tokens).
    Rows,
    /// The count: every sample has its own products (attention's per-head products).
    Count,
}

/// One forward matrix product of a layer, per sample: `count` independent products of an
/// `m × k` by a `k × n` matrix (`2·m·n·k·count` FLOPs per sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct GemmShape {
    /// Rows per sample: output pixels `Ho·Wo` of a convolution, 1 for a linear layer on a
    /// vector, the tokens of a sequence.
    pub m_per_sample: u64,
    /// Output columns: output channels per group, output features.
    pub n: u64,
    /// The reduction: input channels per group × kernel area, input features.
    pub k: u64,
    /// Products per sample: a convolution's groups, attention's heads.
    pub count: u64,
    pub batch_axis: BatchAxis,
}

impl GemmShape {
    /// A product whose rows grow with the batch.
    pub fn rows(m_per_sample: u64, n: u64, k: u64, count: u64) -> GemmShape {
        GemmShape {
            m_per_sample,
            n,
            k,
            count,
            batch_axis: BatchAxis::Rows,
        }
    }

    /// Forward FLOPs per sample (a multiply-add is 2).
    pub fn flops_per_sample(&self) -> u64 {
        2 * self.m_per_sample * self.n * self.k * self.count
    }

    /// `(m, n, k, count)` of the forward product for `batch` samples.
    pub fn at_batch(&self, batch: u64) -> (u64, u64, u64, u64) {
        match self.batch_axis {
            BatchAxis::Rows => (self.m_per_sample * batch, self.n, self.k, self.count),
            BatchAxis::Count => (self.m_per_sample, self.n, self.k, self.count * batch),
        }
    }
}

/// One layer, per sample.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Layer {
    pub name: String,
    pub kind: LayerKind,
    pub params: u64,
    /// Parameter tensors (weight, bias, ...): DDP's per-tensor costs scale with it.
    pub param_tensors: u32,
    /// Forward FLOPs per sample (a multiply-add is 2).
    pub forward_flops: u64,
    /// Elements read as input, per sample.
    pub input_elems: u64,
    /// Elements of the output, per sample (what a pipeline stage sends on, what TP all-reduces).
    pub output_elems: u64,
    /// Elements kept for the backward pass, per sample.
    pub saved_elems: u64,
    /// The forward pass's matrix products; empty for layers without any (and for layers read
    /// from model files, which give FLOPs only).
    pub gemms: Vec<GemmShape>,
    /// Elements the layer's kernels other than its GEMMs move in the forward pass, per sample,
    /// each fused elementwise kernel reading its inputs and writing its output once: a
    /// transformer block's norm, activation, dropout and residual add, the softmax of stored
    /// attention scores, the loss over a head's logits. The backward moves twice as many. 0 for
    /// layers that are elementwise themselves (their whole time is their memory traffic) and for
    /// layers that are one GEMM.
    #[serde(skip_serializing_if = "is_zero")]
    pub elementwise_elems: u64,
    /// Key and value elements per sample that an attention block's queries read: what
    /// context parallelism passes round its ring. 0 for every other layer.
    #[serde(skip_serializing_if = "is_zero")]
    pub kv_elems: u64,
    /// Key/value heads (query groups) of an attention block: what Ulysses context parallelism
    /// splits over TP x CP ranks. 0 for every other layer.
    #[serde(skip_serializing_if = "is_zero")]
    pub kv_heads: u64,
    /// An attention block whose scores never reach memory (FlashAttention; torch's fused
    /// `scaled_dot_product_attention`): one kernel where stored scores take five, and what an
    /// eager step's host issues. False for every other layer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub flash_attention: bool,
    /// Attention scores an attention block stores per sample (heads × sequence², none with
    /// FlashAttention): what an eager step scales, masks and softmaxes as kernels of their own.
    /// 0 for every other layer.
    #[serde(skip_serializing_if = "is_zero")]
    pub stored_score_elems: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// A network: layers in execution order plus what a sample is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Model {
    pub name: String,
    pub layers: Vec<Layer>,
    /// Elements of one input sample (an image, a token sequence's ids).
    pub input_elems: u64,
    /// Tokens per sample for sequence models (throughput is then also given in tokens/s).
    pub tokens_per_sample: Option<u64>,
    /// Mixture-of-experts shape, for models whose MLP blocks are [`LayerKind::MoeBlock`]s.
    pub moe: Option<MoeShape>,
    /// Parameters the head shares with the embedding (the word embeddings of a tied head; 0
    /// without one). Split into pipeline stages, the last holds a copy and Megatron sums the
    /// two copies' gradients after the backward pass.
    pub tied_embedding_params: u64,
}

/// What expert parallelism needs of a mixture-of-experts model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MoeShape {
    pub experts: u64,
    /// Experts each token is routed to (top-k).
    pub experts_per_token: u64,
    /// Parameters of all experts of one MoE block (the part expert parallelism shards; the
    /// router and the norm are replicated).
    pub expert_params_per_block: u64,
    /// Tokens per sample and hidden width: a token's activation is `hidden` elements.
    pub hidden: u64,
}

impl Model {
    /// Parameters per rank of pipeline stage `stage`'s copy of the tied embedding, out of
    /// `stages`, under `tp`-way tensor parallelism (the vocabulary split over TP): the word
    /// embeddings' slice on the last of several stages (Megatron keeps one there for the
    /// head), else 0.
    pub fn tied_embedding_copy(&self, stage: u64, stages: u64, tp: u64) -> u64 {
        if stages > 1 && stage + 1 == stages {
            self.tied_embedding_params / tp.max(1)
        } else {
            0
        }
    }

    pub fn params(&self) -> u64 {
        self.layers.iter().map(|l| l.params).sum()
    }
    pub fn forward_flops(&self) -> u64 {
        self.layers.iter().map(|l| l.forward_flops).sum()
    }
    /// Multiply-adds of convolutions, linear layers and attention products (a MAC counted once).
    pub fn forward_macs(&self) -> u64 {
        self.layers
            .iter()
            .filter(|l| l.kind.is_matmul())
            .map(|l| l.forward_flops / 2)
            .sum()
    }
    pub fn param_tensors(&self) -> u32 {
        self.layers.iter().map(|l| l.param_tensors).sum()
    }
}

/// Why a model could not be built or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: {field}: {expected}")]
pub struct ModelError {
    pub origin: String,
    pub field: String,
    pub expected: String,
}

/// The catalog's model names.
pub const CATALOG: &[&str] = &[
    "alexnet",
    "vgg16",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnext50_32x4d",
    "resnext101_32x8d",
    "resnet18_cifar",
    "inception_v3",
    "bert_base",
    "bert_large",
    "gpt2",
    "gpt_1_3b",
    "gpt3_175b",
    "llama3_8b",
    "llama3_70b",
    "llama3_405b",
    "mixtral_8x7b",
];

/// A model of the catalog by name, or a [`ModelError`] listing the names.
pub fn by_name(name: &str) -> Result<Model, ModelError> {
    if let Some(c) = TransformerConfig::by_name(name) {
        return Ok(transformer(&c));
    }
    Ok(match name {
        "alexnet" => alexnet(),
        "vgg16" => vgg16(),
        "resnet18" => resnet(18, 1000),
        "resnet34" => resnet(34, 1000),
        "resnet50" => resnet(50, 1000),
        "resnet101" => resnet(101, 1000),
        "resnet152" => resnet(152, 1000),
        "resnext50_32x4d" => resnext(50, 32, 4, 1000),
        "resnext101_32x8d" => resnext(101, 32, 8, 1000),
        "resnet18_cifar" => resnet18_cifar(),
        "inception_v3" => inception_v3(),
        other => {
            return Err(ModelError {
                origin: "model catalog".into(),
                field: "model".into(),
                expected: format!("one of {}, got {other:?}", CATALOG.join(", ")),
            })
        }
    })
}

mod cnn;
mod file;
mod transformer;

pub use cnn::{alexnet, inception_v3, resnet, resnet18_cifar, resnext, vgg16, CnnBuilder, Shape};
pub use file::{load_model_file, parse_model_file};
pub use transformer::{transformer, TransformerConfig};

#[cfg(test)]
mod tests;
