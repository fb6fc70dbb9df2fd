//! The catalog's models against their published parameter counts and shapes.
#![cfg(test)]

use super::*;

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
