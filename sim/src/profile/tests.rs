//! The profile's checks: what a profile that loads must hold, and how a bad one is refused
//! (naming the table and field).

#![cfg(test)]
use super::*;

#[test]
fn a_measured_gemm_of_no_size_or_time_is_refused_naming_it() {
    let bundled = Profile::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/profiles/h200_sxm_node.json"),
    )
    .unwrap();
    // The bundled profile with one measured GEMM changed, as read back.
    let refusal = |change: &dyn Fn(&mut GemmTime)| {
        let mut p = bundled.clone();
        let g = p
            .compute
            .as_mut()
            .and_then(|c| c.gemm_times.as_mut())
            .unwrap();
        change(&mut g.times[3]);
        let text = serde_json::to_string(&p).unwrap();
        Profile::parse(&text, "g.json").unwrap_err().to_string()
    };
    let e = refusal(&|t| t.k = 0);
    assert!(
        e.contains("gemm_times.times[3].k") && e.contains("at least 1"),
        "{e}"
    );
    let e = refusal(&|t| t.secs = -1.0);
    assert!(e.contains("gemm_times.times[3].secs"), "{e}");
}

#[test]
fn a_profile_without_provenance_is_refused() {
    let text = r#"{"schema_version": 1, "name": "x"}"#;
    let e = Profile::parse(text, "p.json").unwrap_err();
    assert!(e.to_string().contains("provenance"), "{e}");
    assert!(e.to_string().starts_with("p.json"), "{e}");
}

#[test]
fn factors_and_reduce_bandwidth_round_trip() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "imported", "detail": "nccl-tests log a.txt"},
      "network": {
        "factors": {"ib": {"rows": [{"min_bytes": 0, "bandwidth_factor": 0.9, "latency_factor": 1.5}],
                           "provenance": {"source": "imported", "detail": "fit of a.txt"}}},
        "reduce_bandwidth": {"value": "100GB/s", "provenance": {"source": "public", "detail": "spec"}},
        "host_copy_bandwidth": {"value": "3GB/s", "provenance": {"source": "measured", "detail": "host_costs.py"}}
      }}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    assert_eq!(p.efficiency_factors().lookup(LinkClass::Ib, 10), (0.9, 1.5));
    assert_eq!(p.reduce_bytes_per_s(), Some(100e9));
    assert_eq!(p.host_copy_bytes_per_s(), Some(3e9));
    // Without a copy-out rate of its own, the one staging-copy rate stands for it.
    assert_eq!(p.host_copy_out_bytes_per_s(), Some(3e9));
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    let split = text.replace(
        r#""host_copy_bandwidth""#,
        r#""host_copy_out_bandwidth": {"value": "24GB/s", "provenance": {"source": "measured",
           "detail": "host_costs.py"}}, "host_copy_bandwidth""#,
    );
    let p = Profile::parse(&split, "p.json").unwrap();
    assert_eq!(p.host_copy_bytes_per_s(), Some(3e9));
    assert_eq!(p.host_copy_out_bytes_per_s(), Some(24e9));
}

#[test]
fn collective_fits_and_paths_round_trip_and_need_provenance() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "imported", "detail": "nccl-tests log a.txt"},
      "network": {
        "collective_fits": [{"collective": "all_reduce", "link_class": "nvlink", "ranks": 8, "nodes": 1,
          "alpha_secs": 2e-5, "alpha_ci95_secs": [1e-5, 3e-5], "algbw_bytes_per_s": 1e11,
          "algbw_ci95_low_bytes_per_s": 9e10, "algbw_ci95_high_bytes_per_s": null,
          "busbw_bytes_per_s": 1.75e11, "r_squared": 0.99, "max_rel_residual": 0.1,
          "min_bytes": 8, "max_bytes": 1024, "points": 8,
          "holdout": {"rule": "every:3", "points": 3, "mean_abs_rel_error": 0.05, "max_abs_rel_error": 0.1},
          "provenance": {"source": "imported", "detail": "fit of a.txt"}}],
        "paths": [{"kind": "h2d", "bandwidth": "55GB/s", "provenance": {"source": "public", "detail": "t"}}]
      }}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    assert_eq!(p.network.collective_fits[0].ranks, 8);
    assert_eq!(p.network.paths[0].bandwidth.unwrap().bytes_per_s(), 55e9);
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    let bad = text.replace(r#""detail": "t""#, r#""detail": " ""#);
    let e = Profile::parse(&bad, "p.json").unwrap_err().to_string();
    assert!(e.contains("network.paths[0].provenance"), "{e}");
}

#[test]
fn host_cpu_round_trips_and_a_bad_core_count_is_refused_by_field() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "cpu_costs.py"},
      "network": {"host_cpu": {"shared_cores": 2, "per_message": "100us", "per_byte_ns": 3.2,
                  "provenance": {"source": "measured", "detail": "cpu_costs.py"}}}}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    assert_eq!(p.shared_cores(), Some(2.0));
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    let bad = text.replace(r#""shared_cores": 2"#, r#""shared_cores": 0"#);
    let e = Profile::parse(&bad, "p.json").unwrap_err().to_string();
    assert!(e.contains("network.host_cpu.shared_cores"), "{e}");
    let bad = text.replace(r#""per_byte_ns": 3.2"#, r#""per_byte_ns": -1"#);
    let e = Profile::parse(&bad, "p.json").unwrap_err().to_string();
    assert!(e.contains("network.host_cpu.per_byte_ns"), "{e}");
}

#[test]
fn a_messages_cost_inside_collectives_round_trips_and_is_refused_by_field() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "cpu_costs.py"},
      "network": {"host_cpu": {"shared_cores": 2, "per_message": "100us", "per_byte_ns": 3.2,
                  "provenance": {"source": "measured", "detail": "cpu_costs.py"},
                  "in_collectives": {"per_message": "76us", "per_byte_ns": 1.2,
                    "provenance": {"source": "measured", "detail": "cpu_costs.py --collective"}}}}}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    let c = p
        .network
        .host_cpu
        .as_ref()
        .unwrap()
        .in_collectives
        .as_ref()
        .unwrap();
    assert_eq!(c.per_byte_ns, 1.2);
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    for (good, bad, field) in [
        (
            r#""per_byte_ns": 1.2"#,
            r#""per_byte_ns": -1.2"#,
            "network.host_cpu.in_collectives.per_byte_ns",
        ),
        (
            r#""per_message": "76us""#,
            r#""per_message": "2s""#,
            "network.host_cpu.in_collectives.per_message",
        ),
    ] {
        let text = text.replace(good, bad);
        let e = Profile::parse(&text, "p.json").unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
}

#[test]
fn host_wake_ups_round_trip_and_quantiles_out_of_order_or_range_are_refused_by_field() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "wakeup_load.py"},
      "network": {"host_wake_up": {"extra_secs_quantiles": [0, 0, 0.0001, 0.004],
                  "provenance": {"source": "measured", "detail": "wakeup_load.py"}},
                  "host_cpu": {"shared_cores": 2, "per_message": "100us", "per_byte_ns": 3.2,
                  "provenance": {"source": "measured", "detail": "cpu_costs.py"}}}}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    for bad in ["[0, 0.004, 0.0001]", "[]", "[0, 2]", "[-0.001, 0]"] {
        let text = text.replace("[0, 0, 0.0001, 0.004]", bad);
        let e = Profile::parse(&text, "p.json").unwrap_err().to_string();
        assert!(
            e.contains("p.json") && e.contains("network.host_wake_up.extra_secs_quantiles"),
            "{bad}: {e}"
        );
    }
    // Without the shared cores they would be drawn on, refused.
    let alone = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "wakeup_load.py"},
      "network": {"host_wake_up": {"extra_secs_quantiles": [0, 0.004],
                  "provenance": {"source": "measured", "detail": "wakeup_load.py"}}}}"#;
    let e = Profile::parse(alone, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("network.host_wake_up") && e.contains("network.host_cpu"),
        "{e}"
    );
}

#[test]
fn shaper_waits_and_buckets_reach_the_factors_and_are_refused_by_field_when_wrong() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "packet_wait.py"},
      "network": {
        "shaper_packet_wait": {"ethernet": {"value": "2.1ms",
          "provenance": {"source": "measured", "detail": "suite.py packet_wait"}}},
        "shaper_burst": {"ethernet": {"value": "2ms",
          "provenance": {"source": "measured", "detail": "suite.py shaper_gap"}}}}}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    let f = p.efficiency_factors();
    assert!((f.shaper_packet_wait_secs(LinkClass::Ethernet) - 2.1e-3).abs() < 1e-12);
    assert_eq!(f.shaper_packet_wait_secs(LinkClass::Ib), 0.0);
    assert!((f.shaper_burst_secs(LinkClass::Ethernet) - 2e-3).abs() < 1e-12);
    assert!(!f.is_identity());
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    let long = text.replace(r#""2.1ms""#, r#""2s""#);
    let e = Profile::parse(&long, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("network.shaper_packet_wait.ethernet.value"),
        "{e}"
    );
    let nowhere = text.replace(r#""suite.py packet_wait""#, r#"" ""#);
    let e = Profile::parse(&nowhere, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("network.shaper_packet_wait.ethernet.provenance.detail"),
        "{e}"
    );
    let deep = text.replace(r#""2ms""#, r#""3s""#);
    let e = Profile::parse(&deep, "p.json").unwrap_err().to_string();
    assert!(e.contains("network.shaper_burst.ethernet.value"), "{e}");
}

#[test]
fn the_shapers_packet_reaches_the_factors_and_is_refused_by_field_when_wrong() {
    let text = r#"{
      "schema_version": 1, "name": "x",
      "provenance": {"source": "measured", "detail": "capture_mpi"},
      "network": {
        "shaper_packet": {"ethernet": {"value": 65160,
          "provenance": {"source": "measured", "detail": "tcpdump at the hosts"}}}}}"#;
    let p = Profile::parse(text, "p.json").unwrap();
    let f = p.efficiency_factors();
    assert_eq!(f.shaper_packet_bytes(LinkClass::Ethernet), 65160.0);
    assert_eq!(f.shaper_packet_bytes(LinkClass::Ib), 0.0);
    assert!(!f.is_identity());
    let again = Profile::parse(&serde_json::to_string(&p).unwrap(), "q.json").unwrap();
    assert_eq!(again, p);
    for wrong in ["0", "2000000"] {
        let e = Profile::parse(&text.replace("65160", wrong), "p.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("network.shaper_packet.ethernet.value"), "{e}");
    }
    let nowhere = text.replace("tcpdump at the hosts", " ");
    let e = Profile::parse(&nowhere, "p.json").unwrap_err().to_string();
    assert!(
        e.contains("network.shaper_packet.ethernet.provenance.detail"),
        "{e}"
    );
}

#[test]
fn wrong_schema_version_and_unknown_fields_are_refused() {
    let text =
        r#"{"schema_version": 9, "name": "x", "provenance": {"source": "a", "detail": "b"}}"#;
    assert!(Profile::parse(text, "p.json")
        .unwrap_err()
        .to_string()
        .contains("schema_version"));
    let text = r#"{"schema_version": 1, "name": "x", "provenance": {"source": "a", "detail": "b"}, "colour": 1}"#;
    assert!(Profile::parse(text, "p.json")
        .unwrap_err()
        .to_string()
        .contains("colour"));
}

/// A profile written again as `calibrate` writes it (pretty JSON) reads back to the same
/// numbers, bit for bit, and the testbed's profiles, which `calibrate` wrote, are already in
/// that form: re-importing one measurement into a profile leaves the rest of it as it was
/// (serde_json's exact float parsing; its default, best-effort, moved some numbers by an ulp on
/// every load and save).
#[test]
fn every_shipped_profile_saves_back_to_the_same_numbers_and_calibrates_to_its_own_text() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/profiles");
    let (mut n, mut written_by_calibrate) = (0, 0);
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let loaded = Profile::load(&path).unwrap();
        let text = serde_json::to_string_pretty(&loaded).unwrap() + "\n";
        let again = Profile::parse(&text, "saved").unwrap();
        assert_eq!(loaded, again, "{}", path.display());
        n += 1;
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with("testbed_") {
            assert_eq!(
                text,
                std::fs::read_to_string(&path).unwrap(),
                "{}",
                path.display()
            );
            written_by_calibrate += 1;
        }
    }
    assert!(
        n >= 10 && written_by_calibrate >= 7,
        "{n} {written_by_calibrate}"
    );
}
