//! `calibrate import` of a GPU's compute: PyTorch-measured GEMMs (`torch-device`), a
//! measured node's compute grafted into a cluster profile (`compute`), `calibrate gpu` runs
//! joined (`gpu-measurements`), per-layer times (`layer-times`), what eager steps cost the
//! host and the GPU (`eager`).

use std::path::{Path, PathBuf};

use super::super::*;

/// `calibrate import torch-device`: a compute section from PyTorch-measured GEMMs.
pub(super) fn import_torch_device(file: &Path, o: &OutArgs) -> Result<(), Failure> {
    let d = torch_device::load(file)?;
    let (section, prov) = measured_section(
        &d.gemms,
        Some(d.copy_bytes_per_s),
        &d.device_name,
        d.memory_bytes,
        &d.origin,
        file,
    )?;
    let mut p = open_profile(
        o,
        prov(format!(
            "compute section of {} ({})",
            d.device_name, d.device_kind
        )),
    )?;
    match p.compute.as_mut() {
        // Another dtype of the same device: add its peak and its GEMMs, keep the rest.
        Some(c) if c.device == section.device => {
            c.peak_flops_per_s.extend(section.peak_flops_per_s);
            if let Some(new) = section.gemm_times {
                match c.gemm_times.as_mut() {
                    Some(old) => {
                        let dtypes: Vec<&String> = new.times.iter().map(|t| &t.dtype).collect();
                        old.times.retain(|t| !dtypes.contains(&&t.dtype));
                        old.times.extend(new.times);
                        old.provenance.detail =
                            format!("{}; then {}", old.provenance.detail, new.provenance.detail);
                    }
                    None => c.gemm_times = Some(new),
                }
            }
        }
        Some(c) => {
            return Err(Failure(
                EXIT_INPUT,
                format!(
                    "{}: compute.device is {:?}, not {:?}: write a profile per device",
                    o.out
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    c.device,
                    section.device
                ),
            ))
        }
        None => p.compute = Some(section),
    }
    if o.out.is_none() {
        println!("{}", describe(&p));
    }
    save(&p, &o.out)
}

/// `calibrate import compute`: `source`'s compute section into `out`.
pub(super) fn import_compute(source: &Path, out: &Path) -> Result<(), Failure> {
    let src = Profile::load(source)?;
    let Some(section) = src.compute else {
        return Err(Failure(
            EXIT_INPUT,
            format!(
                "{}: compute: a compute section (written by `calibrate gpu` or `calibrate import \
                 torch-device`); this profile has none",
                source.display()
            ),
        ));
    };
    let origin = format!("{} ({})", source.display(), src.provenance.detail);
    graft_compute(section, &origin, out)
}

/// `calibrate import gpu-measurements`: the compute section of one or more `calibrate gpu`
/// runs' measurements on one device, rebuilt, into `out`: every run's GEMMs, the first's device
/// and copy rate (a later run that measured other models' layers adds their GEMMs).
pub(super) fn import_gpu_measurements(files: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let mut runs = Vec::with_capacity(files.len());
    for file in files {
        runs.push(gpu_measurements::load(file)?);
    }
    let (first, later) = runs.split_first().ok_or_else(|| {
        Failure(
            EXIT_INPUT,
            "calibrate import gpu-measurements: give at least one file".into(),
        )
    })?;
    for (g, file) in later.iter().zip(&files[1..]) {
        if g.device_name != first.device_name {
            return Err(Failure(
                EXIT_INPUT,
                format!(
                "{}: devices[0].name: {:?}, the device of {} ({:?}); measurements of one device \
                 join, not of two",
                file.display(),
                g.device_name,
                files[0].display(),
                first.device_name
                ),
            ));
        }
    }
    let gemms: Vec<_> = runs.iter().flat_map(|g| g.gemms.iter().cloned()).collect();
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let joined = PathBuf::from(names.join(" + "));
    let (section, _) = measured_section(
        &gemms,
        first.copy_bytes_per_s,
        &first.device_name,
        first.memory_bytes,
        &first.origin,
        &joined,
    )?;
    graft_compute(
        section,
        &format!("{} ({})", joined.display(), first.origin),
        out,
    )
}

/// A compute section from measured GEMMs and a copy rate (`crate::compute::compute_section`),
/// with each line fitted printed, and the provenance maker it used; an error naming `file` when
/// there is too little to fit.
fn measured_section(
    gemms: &[crate::compute::GemmTiming],
    copy_bytes_per_s: Option<f64>,
    device: &str,
    memory_bytes: u64,
    origin: &str,
    file: &Path,
) -> Result<
    (
        sim::profile::ComputeCalibration,
        impl Fn(String) -> Provenance,
    ),
    Failure,
> {
    let date = build::today();
    let where_ = format!("{origin} ({})", file.display());
    let prov = move |detail: String| Provenance {
        source: "measured".into(),
        detail: format!("{detail}; {where_}"),
        date: Some(date.clone()),
    };
    let section =
        crate::compute::compute_section(gemms, copy_bytes_per_s, device, memory_bytes, &prov)
            .ok_or_else(|| {
                Failure(
                    EXIT_INPUT,
                    format!(
                        "{}: expected a device copy rate and at least three GEMMs of distinct \
                         size in one dtype",
                        file.display()
                    ),
                )
            })?;
    for f in crate::compute::fit_gemms(gemms) {
        eprintln!("{}", f.describe());
    }
    Ok((section, prov))
}

/// Writes `section` into the profile `out` (created when missing), replacing its compute section
/// but for the peaks of number formats `section` lacks, which stay: rescaled so that they still
/// play at the rate the destination gave them, since the two sections' matmul efficiencies
/// differ (a measured section's peaks are achieved rates, efficiency 1; a datasheet peak came
/// with a nominal efficiency).
fn graft_compute(
    mut section: sim::profile::ComputeCalibration,
    origin: &str,
    out: &Path,
) -> Result<(), Failure> {
    let o = OutArgs {
        out: Some(out.to_path_buf()),
        name: None,
        description: String::new(),
    };
    let mut p = open_profile(
        &o,
        build::provenance(
            "measured",
            format!("compute section of {} from {origin}", section.device),
        ),
    )?;
    let mut kept = Vec::new();
    if let Some(mut old) = p.compute.take() {
        // Measured by another tool on the same device: they stay.
        section.eager_host = std::mem::take(&mut old.eager_host);
        section.eager_kernels = std::mem::take(&mut old.eager_kernels);
        let scale = old.matmul_efficiency.value / section.matmul_efficiency.value;
        for (dtype, mut peak) in old.peak_flops_per_s {
            if section.peak_flops_per_s.contains_key(&dtype) {
                continue;
            }
            kept.push(dtype.clone());
            if scale != 1.0 {
                peak.provenance.detail = format!(
                    "{}; x {scale:.4} (its profile's matmul efficiency {} over the measured \
                     section's {}), so that it plays at the rate it did",
                    peak.provenance.detail,
                    old.matmul_efficiency.value,
                    section.matmul_efficiency.value
                );
                peak.value *= scale;
            }
            section.peak_flops_per_s.insert(dtype, peak);
        }
    }
    eprintln!(
        "compute of {} from {origin}{}",
        section.device,
        if kept.is_empty() {
            String::new()
        } else {
            format!(
                "; kept the destination's {} peak(s), not measured",
                kept.join(", ")
            )
        }
    );
    p.compute = Some(section);
    save(&p, &o.out)
}

/// `calibrate import layer-times`: replaces the profile's layer times of each measured
/// (model, batch, dtype) by the file's.
pub(super) fn import_layer_times(
    file: &Path,
    out: &Path,
    measured_on: Option<&str>,
) -> Result<(), Failure> {
    use std::collections::BTreeMap;
    let name = file.display().to_string();
    let rows = layer_times::load(file)?;
    let mut profile = Profile::load(out)?;
    let Some(compute) = profile.compute.as_mut() else {
        return Err(Failure(
            EXIT_INPUT,
            format!(
                "{}: compute: a compute section to add layer times to (run `calibrate import \
                 torch-device DEVICE.json --out {}` first)",
                out.display(),
                out.display()
            ),
        ));
    };
    let mut groups: BTreeMap<(String, u64, Option<String>), Vec<&layer_times::LayerRow>> =
        BTreeMap::new();
    for r in &rows {
        groups
            .entry((r.model.clone(), r.batch, r.dtype.clone()))
            .or_default()
            .push(r);
    }
    let date = build::today();
    let mut added = 0;
    for ((model_name, batch, dtype), group) in &groups {
        let model = sim::workload::catalog::by_name(model_name)
            .map_err(|e| Failure(EXIT_INPUT, format!("{name}:{}: model: {e}", group[0].line)))?;
        let aligned = layer_times::align(&model, group, &name)?;
        compute
            .layer_times
            .retain(|t| !(t.model == *model_name && t.batch == *batch && t.dtype == *dtype));
        for a in aligned {
            compute.layer_times.push(sim::profile::MeasuredLayerTime {
                model: model_name.clone(),
                layer: a.layer,
                batch: *batch,
                dtype: dtype.clone(),
                forward: sim::units::Duration(sim::engine::SimTime::from_secs_f64(a.forward_secs)),
                backward: sim::units::Duration(sim::engine::SimTime::from_secs_f64(
                    a.backward_secs,
                )),
                provenance: Provenance {
                    source: "measured".into(),
                    detail: format!(
                        "module {} run alone by torch_bench.py, median; {}",
                        a.module,
                        measured_on.unwrap_or(&name)
                    ),
                    date: Some(date.clone()),
                },
            });
            added += 1;
        }
        eprintln!("{model_name} batch {batch}: {} layers", group.len());
    }
    profile.provenance.detail = format!(
        "{}; then layer times from {name}",
        profile.provenance.detail
    );
    eprintln!("{added} layer times");
    save(&profile, &Some(out.to_path_buf()))
}

/// `calibrate import eager`: each file's host costs and kernel rates into `out`'s compute
/// section under its number format (a format measured again replaces the old one).
pub(super) fn import_eager(files: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let mut profile = Profile::load(out)?;
    let Some(compute) = profile.compute.as_mut() else {
        return Err(Failure(
            EXIT_INPUT,
            format!(
                "{}: compute: a compute section to add eager costs to (`calibrate gpu` or \
                 `calibrate import torch-device` first)",
                out.display()
            ),
        ));
    };
    let mut seen = std::collections::BTreeSet::new();
    for f in files {
        let e = eager::load(f)?;
        if let Some(costs) = e.host {
            eprintln!(
                "{}: host costs of {} layer kinds; the step's own {:.1} us forward, {:.1} us \
                 backward, {:.1} us optimizer",
                e.dtype,
                costs.layers.len(),
                costs.step.forward.0.as_secs_f64() * 1e6,
                costs.step.backward.0.as_secs_f64() * 1e6,
                costs.step.optimizer.0.as_secs_f64() * 1e6
            );
            compute.eager_host.insert(e.dtype.clone(), costs);
        }
        if let Some(rates) = e.kernels {
            eprintln!(
                "{}: GPU rates of {} layer kinds",
                e.dtype,
                rates.layers.len()
            );
            // Several files of one format in one import (layers, then blocks) join; the first
            // replaces what the profile had.
            let first = seen.insert(e.dtype.clone());
            match compute.eager_kernels.get_mut(&e.dtype) {
                Some(old) if !first => {
                    old.layers.extend(rates.layers);
                    old.provenance.detail = format!(
                        "{}; then {}",
                        old.provenance.detail, rates.provenance.detail
                    );
                }
                _ => {
                    compute.eager_kernels.insert(e.dtype.clone(), rates);
                }
            }
        }
    }
    save(&profile, &Some(out.to_path_buf()))
}
