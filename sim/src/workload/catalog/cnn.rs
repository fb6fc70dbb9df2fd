//! Convolutional networks layer by layer, as torchvision builds them: a [`CnnBuilder`] follows
//! the activation's shape through convolutions (each its im2col GEMM), norms, activations,
//! pooling and residual or concatenated branches.

use super::{GemmShape, Layer, LayerKind, Model};

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
            flash_attention: false,
            stored_score_elems: 0,
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
            tied_embedding_params: 0,
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
