//! The NCCL model's physical parameters: a profile's fitted values, or NCCL's own constants.
//!
//! Four kinds, each keyed the way [`super::emit`] looks it up (and the way `calibrate`
//! fits it, so a key means one thing on both sides):
//! - base latency `"algo/proto"` (µs per collective call), default NCCL's `baseLat` (2.18–2.19;
//!   from 2.20 NVLS has none and its `hwLat` carries the one-shot latency); or, as
//!   `base_latency_scale`, a factor on that default for the release played (what `calibrate`
//!   fits for NVLS, whose constant NCCL changed between releases);
//! - step latency `"algo/proto/class"` (µs per transfer step, on top of path latency),
//!   default NCCL's `hwLat` for the link kind (NVLink / PCI / network) of the class;
//! - efficiency `"algo/class"`, fraction of the nominal link rate the payload reaches,
//!   default NCCL's own view of the link kind ([`LinkPrior`]): its per-link NVLink bandwidth
//!   (`SM*_NVLINK_BW`) over the link's datasheet rate, its `PCI_BW` over PCIe's payload rate,
//!   and 1 for networks (NCCL takes a NIC's port speed as is);
//! - channel rate `"algo/proto"` (GB/s of payload one channel moves per GPU), default NCCL's
//!   per-channel maxima where its tuner has them (LL, LL128, tree; see `emit`), none
//!   elsewhere. Fitted for NVLS, whose throughput is its thread blocks' (one per channel),
//!   not NVLink's: which is what makes NCCL 2.18–2.19's NVLS, which leaves channels idle
//!   below `channels × heads × chunk` bytes, slower than 2.20's at 64 KiB–2 MiB.

use super::tuner::{self, StepHw};
use super::{Algo, Proto, Version};
use crate::profile::{NcclCalibration, Provenance};
use crate::topology::LinkClass;

/// The link kind NCCL's latency table uses for a link class.
pub fn step_hw(class: LinkClass) -> StepHw {
    match class {
        LinkClass::Nvlink => StepHw::Nvlink,
        LinkClass::Ib | LinkClass::Ethernet => StepHw::Net,
        LinkClass::Pcie | LinkClass::Smp | LinkClass::Other => StepHw::Pci,
    }
}

pub fn base_key(a: Algo, p: Proto) -> String {
    format!("{}/{}", a.as_str(), p.as_str())
}
pub fn step_key(a: Algo, p: Proto, c: LinkClass) -> String {
    format!("{}/{}/{}", a.as_str(), p.as_str(), c.as_str())
}
pub fn efficiency_key(a: Algo, c: LinkClass) -> String {
    format!("{}/{}", a.as_str(), c.as_str())
}
pub fn channel_key(a: Algo, p: Proto) -> String {
    base_key(a, p)
}

/// Whether a channel's rate, not the link's efficiency, is what the model fits for `a`
/// (the two cap the same flows; see the module doc).
pub fn channel_rate_fitted(a: Algo) -> bool {
    a == Algo::Nvls
}

/// NCCL's own estimate of the fraction of a link's datasheet rate its kernels move, per link
/// kind: the default efficiency when no profile measured one. These are the constants NCCL's
/// topology code assigns links (src/graph/topo.h), divided by the rate the hardware is sold at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkPrior {
    pub nvlink: f64,
    pub pcie: f64,
}

impl LinkPrior {
    /// No discount anywhere: the topology's nominal rates as they are.
    pub const NOMINAL: LinkPrior = LinkPrior {
        nvlink: 1.0,
        pcie: 1.0,
    };

    /// `nccl_nvlink_gbps`: NCCL's per-link NVLink bandwidth for the GPU (`SM80_NVLINK_BW` = 20);
    /// `datasheet_nvlink_gbps`: the same link's rate per direction (25 for NVLink2–4), 0 when
    /// the GPU has none. PCIe: `PCI_BW` = 12 GB/s for a Gen3 x16 link, whose payload rate is
    /// 8 GT/s × 16 × 128/130 / 8 = 15.75 GB/s; NCCL scales it by width and generation, so the
    /// ratio holds for every PCIe link.
    pub fn from_nccl(nccl_nvlink_gbps: f64, datasheet_nvlink_gbps: f64) -> LinkPrior {
        LinkPrior {
            nvlink: if datasheet_nvlink_gbps > 0.0 {
                (nccl_nvlink_gbps / datasheet_nvlink_gbps).min(1.0)
            } else {
                1.0
            },
            pcie: 12.0 / 15.75,
        }
    }

    pub fn of(&self, class: LinkClass) -> f64 {
        match class {
            LinkClass::Nvlink => self.nvlink,
            LinkClass::Pcie => self.pcie,
            LinkClass::Ib | LinkClass::Ethernet | LinkClass::Smp | LinkClass::Other => 1.0,
        }
    }
}

/// Parameter lookup with defaults.
#[derive(Debug, Clone)]
pub struct Params<'a> {
    calibration: Option<&'a NcclCalibration>,
    version: Version,
    prior: LinkPrior,
}

impl<'a> Params<'a> {
    pub fn new(
        calibration: Option<&'a NcclCalibration>,
        version: Version,
        prior: LinkPrior,
    ) -> Self {
        Params {
            calibration,
            version,
            prior,
        }
    }
    pub fn base_latency_us(&self, a: Algo, p: Proto) -> f64 {
        let key = base_key(a, p);
        let nccl = default_base_us(self.version, a, p);
        match self.calibration {
            Some(c) => match (c.base_latency_us.get(&key), c.base_latency_scale.get(&key)) {
                (Some(f), _) => f.value,
                (None, Some(s)) => s.value * nccl,
                (None, None) => nccl,
            },
            None => nccl,
        }
    }
    pub fn step_latency_us(&self, a: Algo, p: Proto, c: LinkClass) -> f64 {
        self.calibration
            .and_then(|cal| cal.step_latency_us.get(&step_key(a, p, c)))
            .map_or_else(
                || match a {
                    // NVLS's latency is one-shot (see default_base_us), not per step; so is
                    // NVLS-Tree's inside the node (its network steps pay NCCL's hwLat each).
                    Algo::Nvls => 0.0,
                    Algo::NvlsTree if c == LinkClass::Nvlink => 0.0,
                    _ => tuner::step_latency_us(self.version, step_hw(c), a, p),
                },
                |f| f.value,
            )
    }
    pub fn efficiency(&self, a: Algo, c: LinkClass) -> f64 {
        self.calibration
            .and_then(|cal| cal.efficiency.get(&efficiency_key(a, c)))
            .map_or_else(|| self.prior.of(c), |f| f.value)
    }
    /// One channel's payload rate in GB/s from the profile, if it has one (the caller knows
    /// NCCL's own per-channel maxima, which depend on the communicator).
    pub fn channel_gbps(&self, a: Algo, p: Proto) -> Option<f64> {
        self.calibration
            .and_then(|cal| cal.channel_gbps.get(&channel_key(a, p)))
            .map(|f| f.value)
    }
    /// Which of the parameters `a` uses came from the profile (for reports and for what
    /// `calibrate` fits): `(fitted, defaulted)` keys.
    pub fn sources(&self, a: Algo, p: Proto, c: LinkClass) -> (Vec<String>, Vec<String>) {
        let base = base_key(a, p);
        // The call latency comes from the scale only where no absolute value overrides it.
        let base_table = match self.calibration {
            Some(cal)
                if !cal.base_latency_us.contains_key(&base)
                    && cal.base_latency_scale.contains_key(&base) =>
            {
                "base_latency_scale"
            }
            _ => "base_latency_us",
        };
        let mut keys = vec![
            (base_table, base),
            ("step_latency_us", step_key(a, p, c)),
            ("efficiency", efficiency_key(a, c)),
        ];
        let has_channel_rate = self
            .calibration
            .is_some_and(|cal| cal.channel_gbps.contains_key(&channel_key(a, p)));
        if channel_rate_fitted(a) || has_channel_rate {
            keys.push(("channel_gbps", channel_key(a, p)));
        }
        let mut fitted = Vec::new();
        let mut defaulted = Vec::new();
        for (table, key) in keys {
            let have = self.calibration.is_some_and(|cal| match table {
                "base_latency_us" => cal.base_latency_us.contains_key(&key),
                "base_latency_scale" => cal.base_latency_scale.contains_key(&key),
                "step_latency_us" => cal.step_latency_us.contains_key(&key),
                "channel_gbps" => cal.channel_gbps.contains_key(&key),
                _ => cal.efficiency.contains_key(&key),
            });
            let name = format!("{table}[{key}]");
            if have {
                fitted.push(name)
            } else {
                defaulted.push(name)
            }
        }
        (fitted, defaulted)
    }
}

/// NCCL's per-call latency: `baseLat`, except NVLS from 2.20, whose whole latency is its
/// NVLink `hwLat` (25 µs), paid once per call.
fn default_base_us(v: Version, a: Algo, p: Proto) -> f64 {
    match a {
        Algo::Nvls | Algo::NvlsTree if v.minor >= 20 => {
            tuner::step_latency_us(v, StepHw::Nvlink, a, p)
        }
        _ => tuner::base_latency_us(v, a, p),
    }
}

fn check_key(key: &str, parts: usize) -> Result<(), String> {
    let p: Vec<&str> = key.split('/').collect();
    let ok = p.len() == parts
        && Algo::parse(p[0]).is_some()
        && (parts < 3 || Proto::parse(p[1]).is_some())
        && (parts == 3 || parts == 2)
        && {
            let class = p[parts - 1];
            if parts == 2 && Proto::parse(class).is_some() {
                true
            } else {
                LinkClass::ALL.iter().any(|c| c.as_str() == class)
            }
        };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a key {}, got {key:?}",
            match parts {
                3 => "\"algorithm/protocol/link class\" (e.g. \"ring/ll128/nvlink\")",
                _ => "\"algorithm/protocol\" or \"algorithm/link class\"",
            }
        ))
    }
}

fn check_provenance(p: &Provenance) -> bool {
    !p.source.trim().is_empty() && !p.detail.trim().is_empty()
}

/// Checks keys, ranges and provenance of a profile's NCCL section: (field, expected).
pub fn check(n: &NcclCalibration) -> Result<(), (String, String)> {
    let tables = [
        ("base_latency_us", &n.base_latency_us, 2usize, 0.0, 1e6),
        ("step_latency_us", &n.step_latency_us, 3, 0.0, 1e6),
        ("efficiency", &n.efficiency, 2, 1e-3, 1.0),
        ("channel_gbps", &n.channel_gbps, 2, 1e-3, 1e5),
        ("base_latency_scale", &n.base_latency_scale, 2, 1e-3, 1e3),
    ];
    for (name, table, parts, lo, hi) in tables {
        for (key, v) in table.iter() {
            let field = format!("{name}.{key}");
            check_key(key, parts).map_err(|e| (field.clone(), e))?;
            if !(v.value >= lo && v.value <= hi) {
                return Err((
                    format!("{field}.value"),
                    format!("a number from {lo} to {hi}, got {}", v.value),
                ));
            }
            if !check_provenance(&v.provenance) {
                return Err((
                    format!("{field}.provenance"),
                    "a source and a detail saying where this value came from".into(),
                ));
            }
        }
    }
    for (i, f) in n.fitted_on.iter().enumerate() {
        if f.file.trim().is_empty() || f.file.contains('/') {
            return Err((
                format!("fitted_on[{i}].file"),
                "a file name without directories".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::FittedParameter;

    fn fitted(value: f64) -> FittedParameter {
        FittedParameter {
            value,
            ci95: None,
            provenance: Provenance {
                source: "fitted".into(),
                detail: "test".into(),
                date: None,
            },
        }
    }

    #[test]
    fn a_latency_scale_fitted_under_one_release_follows_nccls_own_change_to_the_next() {
        // NCCL's NVLS call latency: 23 us up to 2.19 (baseLat), 25 us from 2.20 (hwLat).
        let mut cal = NcclCalibration::default();
        cal.base_latency_scale
            .insert("nvls/simple".into(), fitted(1.1));
        let at = |minor| {
            Params::new(Some(&cal), Version { minor }, LinkPrior::NOMINAL)
                .base_latency_us(Algo::Nvls, Proto::Simple)
        };
        assert!((at(18) - 1.1 * 23.0).abs() < 1e-9, "{}", at(18));
        assert!((at(20) - 1.1 * 25.0).abs() < 1e-9, "{}", at(20));
        // An absolute latency for the same key wins, whatever the release.
        cal.base_latency_us
            .insert("nvls/simple".into(), fitted(30.0));
        let p = Params::new(Some(&cal), Version { minor: 18 }, LinkPrior::NOMINAL);
        assert_eq!(p.base_latency_us(Algo::Nvls, Proto::Simple), 30.0);
    }
}
