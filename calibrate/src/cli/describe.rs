//! A profile printed for people (`calibrate show`): every table with its provenance.

use super::*;

/// A profile as text for people.
pub fn describe(p: &Profile) -> String {
    let mut s = String::new();
    let prov = |pr: &Provenance| {
        format!(
            "{}: {}{}",
            pr.source,
            pr.detail,
            pr.date
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )
    };
    s += &format!("profile {} (schema {})\n", p.name, p.schema_version);
    if !p.description.is_empty() {
        s += &format!("  {}\n", p.description);
    }
    s += &format!("  from {}\n", prov(&p.provenance));
    if p.network.factors.is_empty() {
        s += "  link factors: none (links run at the topology's nominal bandwidth and latency)\n";
    }
    for (class, table) in &p.network.factors {
        s += &format!(
            "  link factors for {class} (from {})\n",
            prov(&table.provenance)
        );
        s += "    from size    bandwidth x   latency x\n";
        for r in &table.rows {
            s += &format!(
                "    {:>10}   {:>11.3}   {:>9.3}\n",
                fmt_bytes(r.min_bytes as f64),
                r.bandwidth_factor,
                r.latency_factor
            );
        }
    }
    for (class, e) in &p.network.link_efficiency {
        s += &format!(
            "  link efficiency for {class}: {:.4} of every link, shared by its flows (from {})\n",
            e.value,
            prov(&e.provenance)
        );
    }
    match &p.network.reduce_bandwidth {
        Some(m) => {
            s += &format!(
                "  reduction rate {} (from {})\n",
                fmt_bits_per_s(m.value.bits_per_s()),
                prov(&m.provenance)
            )
        }
        None => s += "  reduction rate: fused into transfers (no extra time)\n",
    }
    if let Some(n) = &p.network.nccl {
        s += "  NCCL model (parameters not listed keep NCCL's own constants):\n";
        let tables: [(&str, &str, &std::collections::BTreeMap<String, _>); 5] = [
            ("per-call latency", "us", &n.base_latency_us),
            (
                "per-call latency factor on NCCL's",
                "x",
                &n.base_latency_scale,
            ),
            ("per-step latency", "us", &n.step_latency_us),
            ("link efficiency", "", &n.efficiency),
            ("channel rate", "GB/s", &n.channel_gbps),
        ];
        for (what, unit, table) in tables {
            for (key, f) in table {
                let ci = f
                    .ci95
                    .map(|[lo, hi]| format!(" [{lo:.4}, {hi:.4}]"))
                    .unwrap_or_else(|| " (interval undetermined)".into());
                s += &format!(
                    "    {what} {key}: {:.4} {unit}{ci} (from {})\n",
                    f.value,
                    prov(&f.provenance)
                );
            }
        }
        for rows in &n.fitted_on {
            s += &format!(
                "    fitted on {} rows {:?} (never scored by dtsim validate)\n",
                rows.file, rows.rows
            );
        }
    }
    if let Some(m) = &p.network.host_copy_bandwidth {
        s += &format!(
            "  host staging-copy rate {} (from {})\n",
            fmt_bits_per_s(m.value.bits_per_s()),
            prov(&m.provenance)
        );
    }
    if let Some(m) = &p.network.host_copy_out_bandwidth {
        s += &format!(
            "  host copy-out rate {} (from {})\n",
            fmt_bits_per_s(m.value.bits_per_s()),
            prov(&m.provenance)
        );
    }
    for f in &p.network.collective_fits {
        s += &format!(
            "  {} over {} ranks / {} node(s) on {}: alpha {:.2} us [{:.2}, {:.2}], busbw {}, R2 {:.4}, max residual {:.1}%{}\n    (from {})\n",
            f.collective, f.ranks, f.nodes, f.link_class, f.alpha_secs * 1e6, f.alpha_ci95_secs[0] * 1e6, f.alpha_ci95_secs[1] * 1e6,
            sim::units::fmt_gbytes_per_s(f.busbw_bytes_per_s), f.r_squared, f.max_rel_residual * 100.0,
            f.holdout.as_ref().map(|h| format!(", hold-out {} on {} sizes: mean {:.1}% max {:.1}%", h.rule, h.points, h.mean_abs_rel_error * 100.0, h.max_abs_rel_error * 100.0)).unwrap_or_default(),
            prov(&f.provenance)
        );
    }
    if !p.network.paths.is_empty() {
        s += &format!("  {} path measurements:\n", p.network.paths.len());
        for m in p.network.paths.iter().take(12) {
            s += &format!(
                "    {} {}->{}: {}{} (from {})\n",
                m.kind,
                m.src.as_deref().unwrap_or("-"),
                m.dst.as_deref().unwrap_or("-"),
                m.bandwidth
                    .map(|b| fmt_bits_per_s(b.bits_per_s()))
                    .unwrap_or_default(),
                m.latency_secs
                    .map(|l| format!(" {:.2} us", l * 1e6))
                    .unwrap_or_default(),
                prov(&m.provenance)
            );
        }
        if p.network.paths.len() > 12 {
            s += &format!("    ... and {} more\n", p.network.paths.len() - 12);
        }
    }
    if let Some(c) = &p.compute {
        s += &format!("  compute: {}\n", c.device);
        for (dt, v) in &c.peak_flops_per_s {
            s += &format!(
                "    peak {dt}: {} (from {})\n",
                fmt_flops_per_s(v.value),
                prov(&v.provenance)
            );
        }
        s += &format!(
            "    memory bandwidth {} (from {})\n",
            fmt_bits_per_s(c.memory_bandwidth.value.bits_per_s()),
            prov(&c.memory_bandwidth.provenance)
        );
    }
    s
}
