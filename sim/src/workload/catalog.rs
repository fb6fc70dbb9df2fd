//! The model catalog: networks as ordered lists of layers with exact shapes, parameter counts,
//! forward FLOPs and activation sizes, per sample.
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

use std::path::Path;

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

/// Channels × height × width of the activation the builder is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub c: u64,
    pub h: u64,
    pub w: u64,
}

impl Shape {
    pub fn elems(self) -> u64 {
        self.c * self.h * self.w
    }
}

/// Builds CNNs layer by layer, tracking the activation shape.
pub struct CnnBuilder {
    pub layers: Vec<Layer>,
    pub shape: Shape,
    input: Shape,
}

fn out_dim(i: u64, k: u64, s: u64, p: u64) -> u64 {
    (i + 2 * p - k) / s + 1
}

impl CnnBuilder {
    pub fn new(c: u64, h: u64, w: u64) -> Self {
        let shape = Shape { c, h, w };
        CnnBuilder {
            layers: Vec::new(),
            shape,
            input: shape,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        name: &str,
        kind: LayerKind,
        params: u64,
        tensors: u32,
        flops: u64,
        out: Shape,
        gemms: Vec<GemmShape>,
    ) {
        let input = self.shape.elems();
        self.layers.push(Layer {
            name: name.to_string(),
            kind,
            params,
            param_tensors: tensors,
            forward_flops: flops,
            input_elems: input,
            output_elems: out.elems(),
            saved_elems: out.elems(),
            gemms,
            elementwise_elems: 0,
            kv_elems: 0,
            kv_heads: 0,
        });
        self.shape = out;
    }

    /// Convolution with kernel `kh×kw`, stride, padding `ph, pw`.
    #[allow(clippy::too_many_arguments)]
    pub fn conv2(
        &mut self,
        name: &str,
        out_c: u64,
        kh: u64,
        kw: u64,
        s: u64,
        ph: u64,
        pw: u64,
        bias: bool,
    ) {
        let i = self.shape;
        let out = Shape {
            c: out_c,
            h: out_dim(i.h, kh, s, ph),
            w: out_dim(i.w, kw, s, pw),
        };
        let weights = out_c * i.c * kh * kw;
        let params = weights + if bias { out_c } else { 0 };
        let macs = out.elems() * i.c * kh * kw;
        let im2col = GemmShape::rows(out.h * out.w, out_c, i.c * kh * kw, 1);
        self.push(
            name,
            LayerKind::Conv,
            params,
            1 + bias as u32,
            2 * macs,
            out,
            vec![im2col],
        );
    }

    pub fn conv(&mut self, name: &str, out_c: u64, k: u64, s: u64, p: u64, bias: bool) {
        self.conv2(name, out_c, k, k, s, p, p, bias);
    }

    /// Square convolution in `groups` groups (ResNeXt): each output channel sees
    /// `in_channels / groups` inputs. No bias.
    pub fn conv_grouped(&mut self, name: &str, out_c: u64, k: u64, s: u64, p: u64, groups: u64) {
        let i = self.shape;
        let out = Shape {
            c: out_c,
            h: out_dim(i.h, k, s, p),
            w: out_dim(i.w, k, s, p),
        };
        let per_group_in = i.c / groups;
        let params = out_c * per_group_in * k * k;
        let macs = out.elems() * per_group_in * k * k;
        let im2col = GemmShape::rows(out.h * out.w, out_c / groups, per_group_in * k * k, groups);
        self.push(
            name,
            LayerKind::Conv,
            params,
            1,
            2 * macs,
            out,
            vec![im2col],
        );
    }

    pub fn bn(&mut self, name: &str) {
        let s = self.shape;
        self.push(
            name,
            LayerKind::Norm,
            2 * s.c,
            2,
            4 * s.elems(),
            s,
            Vec::new(),
        );
    }

    pub fn relu(&mut self, name: &str) {
        let s = self.shape;
        self.push(name, LayerKind::Activation, 0, 0, s.elems(), s, Vec::new());
    }

    pub fn maxpool(&mut self, name: &str, k: u64, s: u64, p: u64) {
        self.pool(name, k, s, p);
    }

    pub fn pool(&mut self, name: &str, k: u64, s: u64, p: u64) {
        let i = self.shape;
        let out = Shape {
            c: i.c,
            h: out_dim(i.h, k, s, p),
            w: out_dim(i.w, k, s, p),
        };
        self.push(
            name,
            LayerKind::Pool,
            0,
            0,
            out.elems() * k * k,
            out,
            Vec::new(),
        );
    }

    /// Adaptive average pooling to `h×w`.
    pub fn adaptive_pool(&mut self, name: &str, h: u64, w: u64) {
        let i = self.shape;
        let out = Shape { c: i.c, h, w };
        self.push(name, LayerKind::Pool, 0, 0, i.elems(), out, Vec::new());
    }

    /// Residual addition (or concatenation bookkeeping) producing `out`.
    pub fn add(&mut self, name: &str, out: Shape) {
        self.push(name, LayerKind::Add, 0, 0, out.elems(), out, Vec::new());
    }

    pub fn linear(&mut self, name: &str, out_f: u64, bias: bool) {
        let in_f = self.shape.elems();
        let out = Shape {
            c: out_f,
            h: 1,
            w: 1,
        };
        let params = in_f * out_f + if bias { out_f } else { 0 };
        self.push(
            name,
            LayerKind::Linear,
            params,
            1 + bias as u32,
            2 * in_f * out_f,
            out,
            vec![GemmShape::rows(1, out_f, in_f, 1)],
        );
    }

    pub fn finish(self, name: &str) -> Model {
        Model {
            name: name.to_string(),
            layers: self.layers,
            input_elems: self.input.elems(),
            tokens_per_sample: None,
            moe: None,
        }
    }
}

/// torchvision `alexnet`.
pub fn alexnet() -> Model {
    let mut b = CnnBuilder::new(3, 224, 224);
    b.conv("features.0", 64, 11, 4, 2, true);
    b.relu("features.1");
    b.maxpool("features.2", 3, 2, 0);
    b.conv("features.3", 192, 5, 1, 2, true);
    b.relu("features.4");
    b.maxpool("features.5", 3, 2, 0);
    b.conv("features.6", 384, 3, 1, 1, true);
    b.relu("features.7");
    b.conv("features.8", 256, 3, 1, 1, true);
    b.relu("features.9");
    b.conv("features.10", 256, 3, 1, 1, true);
    b.relu("features.11");
    b.maxpool("features.12", 3, 2, 0);
    b.adaptive_pool("avgpool", 6, 6);
    b.linear("classifier.1", 4096, true);
    b.relu("classifier.2");
    b.linear("classifier.4", 4096, true);
    b.relu("classifier.5");
    b.linear("classifier.6", 1000, true);
    b.finish("alexnet")
}

/// torchvision `vgg16` (configuration D, no batch norm).
pub fn vgg16() -> Model {
    let mut b = CnnBuilder::new(3, 224, 224);
    let cfg: [u64; 18] = [
        64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
    ];
    for (i, &c) in cfg.iter().enumerate() {
        if c == 0 {
            b.maxpool(&format!("features.pool{i}"), 2, 2, 0);
        } else {
            b.conv(&format!("features.conv{i}"), c, 3, 1, 1, true);
            b.relu(&format!("features.relu{i}"));
        }
    }
    b.adaptive_pool("avgpool", 7, 7);
    b.linear("classifier.0", 4096, true);
    b.relu("classifier.1");
    b.linear("classifier.3", 4096, true);
    b.relu("classifier.4");
    b.linear("classifier.6", 1000, true);
    b.finish("vgg16")
}

fn basic_block(b: &mut CnnBuilder, name: &str, planes: u64, stride: u64) {
    let input = b.shape;
    b.conv(&format!("{name}.conv1"), planes, 3, stride, 1, false);
    b.bn(&format!("{name}.bn1"));
    b.relu(&format!("{name}.relu1"));
    b.conv(&format!("{name}.conv2"), planes, 3, 1, 1, false);
    b.bn(&format!("{name}.bn2"));
    let out = b.shape;
    if stride != 1 || input.c != planes {
        b.shape = input;
        b.conv(&format!("{name}.downsample.0"), planes, 1, stride, 0, false);
        b.bn(&format!("{name}.downsample.1"));
    }
    b.add(&format!("{name}.add"), out);
    b.relu(&format!("{name}.relu2"));
}

/// torchvision's Bottleneck: 1×1 to `width`, 3×3 (in `groups` groups, ResNeXt) at `stride`,
/// 1×1 to 4 × `planes`; plain ResNet has width = planes and one group.
fn bottleneck(b: &mut CnnBuilder, name: &str, planes: u64, stride: u64, width: u64, groups: u64) {
    let input = b.shape;
    b.conv(&format!("{name}.conv1"), width, 1, 1, 0, false);
    b.bn(&format!("{name}.bn1"));
    b.relu(&format!("{name}.relu1"));
    b.conv_grouped(&format!("{name}.conv2"), width, 3, stride, 1, groups);
    b.bn(&format!("{name}.bn2"));
    b.relu(&format!("{name}.relu2"));
    b.conv(&format!("{name}.conv3"), planes * 4, 1, 1, 0, false);
    b.bn(&format!("{name}.bn3"));
    let out = b.shape;
    if stride != 1 || input.c != planes * 4 {
        b.shape = input;
        b.conv(
            &format!("{name}.downsample.0"),
            planes * 4,
            1,
            stride,
            0,
            false,
        );
        b.bn(&format!("{name}.downsample.1"));
    }
    b.add(&format!("{name}.add"), out);
    b.relu(&format!("{name}.relu3"));
}

/// ResNet stages; `groups` and `width_per_group` as torchvision (1 and 64 for plain ResNet).
fn resnet_stages(b: &mut CnnBuilder, depth: u32, groups: u64, width_per_group: u64) {
    let (blocks, bottle): ([u32; 4], bool) = match depth {
        18 => ([2, 2, 2, 2], false),
        34 => ([3, 4, 6, 3], false),
        50 => ([3, 4, 6, 3], true),
        101 => ([3, 4, 23, 3], true),
        _ => ([3, 8, 36, 3], true),
    };
    for (stage, &n) in blocks.iter().enumerate() {
        let planes = 64u64 << stage;
        for i in 0..n {
            let stride = if i == 0 && stage > 0 { 2 } else { 1 };
            let name = format!("layer{}.{i}", stage + 1);
            if bottle {
                let width = planes * width_per_group / 64 * groups;
                bottleneck(b, &name, planes, stride, width, groups);
            } else {
                basic_block(b, &name, planes, stride);
            }
        }
    }
}

/// torchvision `resnet{18,34,50,101,152}` at 224×224 (v1.5: stride in the 3×3 convolution).
/// Any other depth builds ResNet-152.
pub fn resnet(depth: u32, classes: u64) -> Model {
    let mut b = CnnBuilder::new(3, 224, 224);
    b.conv("conv1", 64, 7, 2, 3, false);
    b.bn("bn1");
    b.relu("relu");
    b.maxpool("maxpool", 3, 2, 1);
    resnet_stages(&mut b, depth, 1, 64);
    b.adaptive_pool("avgpool", 1, 1);
    b.linear("fc", classes, true);
    b.finish(&format!("resnet{depth}"))
}

/// torchvision `resnext50_32x4d` / `resnext101_32x8d` at 224×224: ResNet-50/101 bottlenecks
/// whose 3×3 convolutions run in `groups` groups of `width_per_group` channels.
pub fn resnext(depth: u32, groups: u64, width_per_group: u64, classes: u64) -> Model {
    let mut b = CnnBuilder::new(3, 224, 224);
    b.conv("conv1", 64, 7, 2, 3, false);
    b.bn("bn1");
    b.relu("relu");
    b.maxpool("maxpool", 3, 2, 1);
    resnet_stages(&mut b, depth, groups, width_per_group);
    b.adaptive_pool("avgpool", 1, 1);
    b.linear("fc", classes, true);
    b.finish(&format!("resnext{depth}_{groups}x{width_per_group}d"))
}

/// ResNet-18 for CIFAR-10 (32×32 inputs, 3×3 stem, no max-pool, 10 classes), as in
/// `kuangliu/pytorch-cifar`.
pub fn resnet18_cifar() -> Model {
    let mut b = CnnBuilder::new(3, 32, 32);
    b.conv("conv1", 64, 3, 1, 1, false);
    b.bn("bn1");
    b.relu("relu");
    resnet_stages(&mut b, 18, 1, 64);
    b.adaptive_pool("avgpool", 1, 1);
    b.linear("linear", 10, true);
    b.finish("resnet18_cifar")
}

/// torchvision's `BasicConv2d`: convolution without bias, batch norm, ReLU.
#[allow(clippy::too_many_arguments)]
fn basic_conv(
    b: &mut CnnBuilder,
    name: &str,
    out_c: u64,
    kh: u64,
    kw: u64,
    s: u64,
    ph: u64,
    pw: u64,
) {
    b.conv2(&format!("{name}.conv"), out_c, kh, kw, s, ph, pw, false);
    b.bn(&format!("{name}.bn"));
    b.relu(&format!("{name}.relu"));
}

/// Runs each branch from the block's input and concatenates their channels.
fn branches(b: &mut CnnBuilder, name: &str, list: &[&dyn Fn(&mut CnnBuilder)]) {
    let input = b.shape;
    let mut channels = 0;
    let mut hw = (input.h, input.w);
    for f in list {
        b.shape = input;
        f(b);
        channels += b.shape.c;
        hw = (b.shape.h, b.shape.w);
    }
    b.add(
        &format!("{name}.concat"),
        Shape {
            c: channels,
            h: hw.0,
            w: hw.1,
        },
    );
}

fn inception_a(b: &mut CnnBuilder, n: &str, pool_features: u64) {
    branches(
        b,
        n,
        &[
            &|b| basic_conv(b, &format!("{n}.branch1x1"), 64, 1, 1, 1, 0, 0),
            &|b| {
                basic_conv(b, &format!("{n}.branch5x5_1"), 48, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch5x5_2"), 64, 5, 5, 1, 2, 2);
            },
            &|b| {
                basic_conv(b, &format!("{n}.branch3x3dbl_1"), 64, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch3x3dbl_2"), 96, 3, 3, 1, 1, 1);
                basic_conv(b, &format!("{n}.branch3x3dbl_3"), 96, 3, 3, 1, 1, 1);
            },
            &|b| {
                b.pool(&format!("{n}.avgpool"), 3, 1, 1);
                basic_conv(b, &format!("{n}.branch_pool"), pool_features, 1, 1, 1, 0, 0);
            },
        ],
    );
}

fn inception_b(b: &mut CnnBuilder, n: &str) {
    branches(
        b,
        n,
        &[
            &|b| basic_conv(b, &format!("{n}.branch3x3"), 384, 3, 3, 2, 0, 0),
            &|b| {
                basic_conv(b, &format!("{n}.branch3x3dbl_1"), 64, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch3x3dbl_2"), 96, 3, 3, 1, 1, 1);
                basic_conv(b, &format!("{n}.branch3x3dbl_3"), 96, 3, 3, 2, 0, 0);
            },
            &|b| b.maxpool(&format!("{n}.maxpool"), 3, 2, 0),
        ],
    );
}

fn inception_c(b: &mut CnnBuilder, n: &str, c7: u64) {
    branches(
        b,
        n,
        &[
            &|b| basic_conv(b, &format!("{n}.branch1x1"), 192, 1, 1, 1, 0, 0),
            &|b| {
                basic_conv(b, &format!("{n}.branch7x7_1"), c7, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch7x7_2"), c7, 1, 7, 1, 0, 3);
                basic_conv(b, &format!("{n}.branch7x7_3"), 192, 7, 1, 1, 3, 0);
            },
            &|b| {
                basic_conv(b, &format!("{n}.branch7x7dbl_1"), c7, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch7x7dbl_2"), c7, 7, 1, 1, 3, 0);
                basic_conv(b, &format!("{n}.branch7x7dbl_3"), c7, 1, 7, 1, 0, 3);
                basic_conv(b, &format!("{n}.branch7x7dbl_4"), c7, 7, 1, 1, 3, 0);
                basic_conv(b, &format!("{n}.branch7x7dbl_5"), 192, 1, 7, 1, 0, 3);
            },
            &|b| {
                b.pool(&format!("{n}.avgpool"), 3, 1, 1);
                basic_conv(b, &format!("{n}.branch_pool"), 192, 1, 1, 1, 0, 0);
            },
        ],
    );
}

fn inception_d(b: &mut CnnBuilder, n: &str) {
    branches(
        b,
        n,
        &[
            &|b| {
                basic_conv(b, &format!("{n}.branch3x3_1"), 192, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch3x3_2"), 320, 3, 3, 2, 0, 0);
            },
            &|b| {
                basic_conv(b, &format!("{n}.branch7x7x3_1"), 192, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch7x7x3_2"), 192, 1, 7, 1, 0, 3);
                basic_conv(b, &format!("{n}.branch7x7x3_3"), 192, 7, 1, 1, 3, 0);
                basic_conv(b, &format!("{n}.branch7x7x3_4"), 192, 3, 3, 2, 0, 0);
            },
            &|b| b.maxpool(&format!("{n}.maxpool"), 3, 2, 0),
        ],
    );
}

fn inception_e(b: &mut CnnBuilder, n: &str) {
    branches(
        b,
        n,
        &[
            &|b| basic_conv(b, &format!("{n}.branch1x1"), 320, 1, 1, 1, 0, 0),
            &|b| {
                basic_conv(b, &format!("{n}.branch3x3_1"), 384, 1, 1, 1, 0, 0);
                let mid = b.shape;
                basic_conv(b, &format!("{n}.branch3x3_2a"), 384, 1, 3, 1, 0, 1);
                b.shape = mid;
                basic_conv(b, &format!("{n}.branch3x3_2b"), 384, 3, 1, 1, 1, 0);
                b.shape.c = 768;
            },
            &|b| {
                basic_conv(b, &format!("{n}.branch3x3dbl_1"), 448, 1, 1, 1, 0, 0);
                basic_conv(b, &format!("{n}.branch3x3dbl_2"), 384, 3, 3, 1, 1, 1);
                let mid = b.shape;
                basic_conv(b, &format!("{n}.branch3x3dbl_3a"), 384, 1, 3, 1, 0, 1);
                b.shape = mid;
                basic_conv(b, &format!("{n}.branch3x3dbl_3b"), 384, 3, 1, 1, 1, 0);
                b.shape.c = 768;
            },
            &|b| {
                b.pool(&format!("{n}.avgpool"), 3, 1, 1);
                basic_conv(b, &format!("{n}.branch_pool"), 192, 1, 1, 1, 0, 0);
            },
        ],
    );
}

/// torchvision `inception_v3` at 299×299 with the auxiliary classifier (its default,
/// `aux_logits=True`); the auxiliary head runs after Mixed_6e, as in training.
pub fn inception_v3() -> Model {
    let mut b = CnnBuilder::new(3, 299, 299);
    basic_conv(&mut b, "Conv2d_1a_3x3", 32, 3, 3, 2, 0, 0);
    basic_conv(&mut b, "Conv2d_2a_3x3", 32, 3, 3, 1, 0, 0);
    basic_conv(&mut b, "Conv2d_2b_3x3", 64, 3, 3, 1, 1, 1);
    b.maxpool("maxpool1", 3, 2, 0);
    basic_conv(&mut b, "Conv2d_3b_1x1", 80, 1, 1, 1, 0, 0);
    basic_conv(&mut b, "Conv2d_4a_3x3", 192, 3, 3, 1, 0, 0);
    b.maxpool("maxpool2", 3, 2, 0);
    inception_a(&mut b, "Mixed_5b", 32);
    inception_a(&mut b, "Mixed_5c", 64);
    inception_a(&mut b, "Mixed_5d", 64);
    inception_b(&mut b, "Mixed_6a");
    inception_c(&mut b, "Mixed_6b", 128);
    inception_c(&mut b, "Mixed_6c", 160);
    inception_c(&mut b, "Mixed_6d", 160);
    inception_c(&mut b, "Mixed_6e", 192);
    let main = b.shape;
    b.pool("AuxLogits.avgpool", 5, 3, 0);
    basic_conv(&mut b, "AuxLogits.conv0", 128, 1, 1, 1, 0, 0);
    basic_conv(&mut b, "AuxLogits.conv1", 768, 5, 5, 1, 0, 0);
    b.adaptive_pool("AuxLogits.pool", 1, 1);
    b.linear("AuxLogits.fc", 1000, true);
    b.shape = main;
    inception_d(&mut b, "Mixed_7a");
    inception_e(&mut b, "Mixed_7b");
    inception_e(&mut b, "Mixed_7c");
    b.adaptive_pool("avgpool", 1, 1);
    b.linear("fc", 1000, true);
    b.finish("inception_v3")
}

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

/// A model file: a list of layers, so users bring their own networks.
///
/// ```toml
/// name = "mlp"
/// input_elements = 784
/// [[layer]]
/// name = "fc1"
/// kind = "linear"            # conv | linear | norm | activation | pool | add | embedding |
/// params = 200960            #   attention_block | mlp_block
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
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn transformer_blocks_count_the_traffic_of_their_kernels_besides_the_gemms() {
        let layer = |c: &TransformerConfig, name: &str| {
            transformer(c)
                .layers
                .into_iter()
                .find(|l| l.name == name)
                .unwrap()
        };
        // GPT-2: 1,024 tokens of 768, 12 heads, a plain 3,072-wide MLP, scores stored.
        let gpt2 = TransformerConfig::gpt2();
        let (s, h, a, f) = (1024, 768, 12, 3072);
        // Norm (2), dropout and residual add (3); the stored scores softmaxed (2 per score).
        assert_eq!(
            layer(&gpt2, "h.0.attn").elementwise_elems,
            5 * s * h + 2 * a * s * s
        );
        // Norm, dropout and residual; GELU reads and writes the 3,072-wide activation.
        assert_eq!(
            layer(&gpt2, "h.0.mlp").elementwise_elems,
            5 * s * h + 2 * s * f
        );
        // The loss reads the logits once forward.
        assert_eq!(layer(&gpt2, "lm_head").elementwise_elems, s * 50257);
        // With FlashAttention no score goes through memory.
        let flash = TransformerConfig {
            flash_attention: true,
            ..gpt2.clone()
        };
        assert_eq!(layer(&flash, "h.0.attn").elementwise_elems, 5 * s * h);
        // Llama-3 8B's gated MLP reads gate and up and writes their product.
        let llama = TransformerConfig::llama3_8b();
        assert_eq!(
            layer(&llama, "h.0.mlp").elementwise_elems,
            5 * 8192 * 4096 + 3 * 8192 * 14336
        );
        // Layers that are elementwise themselves, or one GEMM, carry none.
        assert_eq!(layer(&gpt2, "ln_f").elementwise_elems, 0);
        assert_eq!(layer(&gpt2, "embeddings").elementwise_elems, 0);
    }

    use super::*;

    #[test]
    fn parameter_counts_match_torchvision_exactly() {
        assert_eq!(alexnet().params(), 61_100_840);
        assert_eq!(vgg16().params(), 138_357_544);
        assert_eq!(resnet(18, 1000).params(), 11_689_512);
        assert_eq!(resnet(34, 1000).params(), 21_797_672);
        assert_eq!(resnet(50, 1000).params(), 25_557_032);
        assert_eq!(resnet(101, 1000).params(), 44_549_160);
        assert_eq!(resnet(152, 1000).params(), 60_192_808);
        assert_eq!(inception_v3().params(), 27_161_264);
        // torchvision's documented num_params for the ResNeXt weights.
        assert_eq!(resnext(50, 32, 4, 1000).params(), 25_028_904);
        assert_eq!(resnext(101, 32, 8, 1000).params(), 88_791_336);
        assert_eq!(by_name("resnext50_32x4d").unwrap().params(), 25_028_904);
    }

    #[test]
    fn cifar_resnet18_matches_kuangliu_pytorch_cifar() {
        assert_eq!(resnet18_cifar().params(), 11_173_962);
    }

    #[test]
    fn transformer_parameter_counts_match_hugging_face() {
        assert_eq!(
            transformer(&TransformerConfig::bert_base()).params(),
            109_482_240
        );
        assert_eq!(
            transformer(&TransformerConfig::bert_large()).params(),
            335_141_888
        );
        assert_eq!(
            transformer(&TransformerConfig::gpt2()).params(),
            124_439_808
        );
        let p = transformer(&TransformerConfig::gpt_1_3b()).params();
        assert_eq!(p, 1_315_723_264);
    }

    #[test]
    fn llama3_parameter_counts_match_the_published_models() {
        // Hugging Face model cards / safetensors totals of meta-llama/Meta-Llama-3-8B,
        // Meta-Llama-3-70B and Llama-3.1-405B.
        let count = |c: TransformerConfig| transformer(&c).params();
        assert_eq!(count(TransformerConfig::llama3_8b()), 8_030_261_248);
        assert_eq!(count(TransformerConfig::llama3_70b()), 70_553_706_496);
        assert_eq!(count(TransformerConfig::llama3_405b()), 405_853_388_800);
    }

    #[test]
    fn mixtral_has_its_published_total_and_active_parameters() {
        let m = transformer(&TransformerConfig::mixtral_8x7b());
        // Hugging Face mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 parameters.
        assert_eq!(m.params(), 46_702_792_704);
        let moe = m.moe.unwrap();
        assert_eq!((moe.experts, moe.experts_per_token), (8, 2));
        // Active per token: all but 6 of the 8 experts of every block (Mistral: ~12.9B).
        let active = m.params() - 32 * moe.expert_params_per_block * 6 / 8;
        assert!((active as f64 / 12.9e9 - 1.0).abs() < 0.01, "{active}");
    }

    #[test]
    fn gpt3_175b_is_the_papers_shape() {
        // 12·L·h² + 13·L·h (blocks with biases and layer norms) + (V + S)·h (token and
        // position tables) + 2·h (final norm); the paper rounds it to 175.0B.
        let (l, h, v, s) = (96u64, 12288u64, 50257u64, 2048u64);
        let formula = 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h;
        let p = transformer(&TransformerConfig::gpt3_175b()).params();
        assert_eq!(p, formula);
        assert_eq!(p, 174_604_259_328);
        assert!((p as f64 / 175.0e9 - 1.0).abs() < 0.003);
    }

    #[test]
    fn grouped_query_attention_shrinks_only_the_key_value_projections() {
        let full = TransformerConfig {
            kv_heads: None,
            ..TransformerConfig::llama3_8b()
        };
        let m_full = transformer(&full);
        let m_gqa = transformer(&TransformerConfig::llama3_8b());
        let attn = |m: &Model| {
            m.layers
                .iter()
                .find(|l| l.name == "h.0.attn")
                .unwrap()
                .clone()
        };
        let (h, kv) = (4096u64, 8 * 128u64);
        // K and V go from h × h each to h × (8 heads × 128).
        assert_eq!(attn(&m_full).params - attn(&m_gqa).params, 2 * h * (h - kv));
        // The attention products themselves (per query head) are unchanged.
        assert_eq!(
            attn(&m_full).forward_flops - attn(&m_gqa).forward_flops,
            2 * 8192 * h * 2 * (h - kv)
        );
        let mlp = |m: &Model| {
            m.layers
                .iter()
                .find(|l| l.name == "h.0.mlp")
                .unwrap()
                .params
        };
        assert_eq!(mlp(&m_full), mlp(&m_gqa));
    }

    #[test]
    fn resnet50_forward_is_4_1_gmacs_at_224() {
        let macs = resnet(50, 1000).forward_macs() as f64;
        assert!((macs / 4.1e9 - 1.0).abs() < 0.01, "{macs}");
        // FLOPs count a multiply-add twice.
        let m = resnet(50, 1000);
        assert!(m.forward_flops() >= 2 * m.forward_macs());
    }

    #[test]
    fn shapes_flow_through_resnet50() {
        let m = resnet(50, 1000);
        let fc = m.layers.last().unwrap();
        assert_eq!(fc.input_elems, 2048);
        assert_eq!(fc.output_elems, 1000);
        assert_eq!(m.layers[0].output_elems, 64 * 112 * 112);
        assert_eq!(m.param_tensors(), 161);
    }

    #[test]
    fn every_catalog_name_builds() {
        for name in CATALOG {
            let m = by_name(name).unwrap();
            assert!(m.params() > 0 && m.forward_flops() > 0, "{name}");
        }
        let e = by_name("resnet51").unwrap_err();
        assert!(e.to_string().contains("resnet50"), "{e}");
    }

    #[test]
    fn conv_and_linear_gemms_carry_exactly_the_forward_flops() {
        for name in CATALOG {
            let m = by_name(name).unwrap();
            for l in &m.layers {
                let gemm_flops: u64 = l.gemms.iter().map(GemmShape::flops_per_sample).sum();
                match l.kind {
                    LayerKind::Conv | LayerKind::Linear | LayerKind::Head => {
                        assert_eq!(gemm_flops, l.forward_flops, "{name} {}", l.name)
                    }
                    // Attention adds softmax/scale work (5·a·s²), the MLP its activation (8·s·f),
                    // a MoE block that of the k experts a token visits.
                    LayerKind::AttentionBlock | LayerKind::MlpBlock | LayerKind::MoeBlock => {
                        assert!(
                            gemm_flops > 0 && gemm_flops < l.forward_flops,
                            "{name} {}",
                            l.name
                        );
                        assert!(
                            gemm_flops as f64 > 0.95 * l.forward_flops as f64,
                            "{name} {}",
                            l.name
                        );
                    }
                    _ => assert!(l.gemms.is_empty(), "{name} {}", l.name),
                }
            }
        }
    }

    #[test]
    fn resnet50_layer1_conv2_is_an_im2col_gemm() {
        let m = resnet(50, 1000);
        let l = m
            .layers
            .iter()
            .find(|l| l.name == "layer1.0.conv2")
            .unwrap();
        assert_eq!(l.gemms.len(), 1);
        assert_eq!(l.gemms[0].at_batch(32), (32 * 56 * 56, 64, 576, 1));
        let fc = m.layers.iter().find(|l| l.name == "fc").unwrap();
        assert_eq!(fc.gemms[0].at_batch(8), (8, 1000, 2048, 1));
    }

    #[test]
    fn a_grouped_convolution_is_one_gemm_per_group() {
        let m = resnext(50, 32, 4, 1000);
        let l = m
            .layers
            .iter()
            .find(|l| l.name == "layer1.0.conv2")
            .unwrap();
        // width 128 in 32 groups: 4 output and 4 × 3 × 3 input channels per group.
        assert_eq!(l.gemms[0].at_batch(2), (2 * 56 * 56, 4, 36, 32));
    }

    #[test]
    fn attention_products_are_per_sample_and_head() {
        let m = transformer(&TransformerConfig::bert_base());
        let attn = &m.layers[1];
        assert_eq!(attn.kind, LayerKind::AttentionBlock);
        // Q·Kᵀ per head: 128 × 128 from 64, 12 heads per sample, 4 samples.
        assert_eq!(attn.gemms[1].at_batch(4), (128, 128, 64, 48));
        // The QKV projection stacks the tokens of all samples.
        assert_eq!(attn.gemms[0].at_batch(4), (512, 3 * 768, 768, 1));
        // Everything but the softmax and scaling (5·a·s² FLOPs) is matrix products.
        let gemm_flops: u64 = attn.gemms.iter().map(GemmShape::flops_per_sample).sum();
        assert_eq!(attn.forward_flops - gemm_flops, 5 * 12 * 128 * 128);
        let mlp = &m.layers[2];
        let gemm_flops: u64 = mlp.gemms.iter().map(GemmShape::flops_per_sample).sum();
        assert_eq!(mlp.forward_flops - gemm_flops, 8 * 128 * 3072);
    }

    #[test]
    fn a_model_file_is_a_list_of_layers() {
        let text = r#"
            name = "mlp"
            input_elements = 784
            [[layer]]
            name = "fc1"
            kind = "linear"
            params = 200960
            forward_flops = 401408
            output_elements = 256
            [[layer]]
            name = "relu"
            kind = "activation"
            forward_flops = 256
            output_elements = 256
        "#;
        let m = parse_model_file(text, "mlp.toml").unwrap();
        assert_eq!(m.params(), 200_960);
        assert_eq!(m.layers[1].input_elems, 256);
        assert_eq!(m.layers[0].param_tensors, 2);
        let bad = parse_model_file("name = \"x\"\ninput_elements = 1\n[[layer]]\nname = \"a\"\nkind = \"lstm\"\nforward_flops = 1\noutput_elements = 1\n", "x.toml").unwrap_err();
        assert!(bad.to_string().starts_with("x.toml"), "{bad}");
        assert!(bad.to_string().contains("lstm"), "{bad}");
    }
}
