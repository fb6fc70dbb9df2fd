//! What a scenario's `[network]` table sets for the packet model: switch mode, MTUs, pause
//! thresholds, retransmission timeout, windows and congestion control.

use serde::{Deserialize, Serialize};

use crate::engine::SimTime;
use crate::topology::LinkClass;

/// What a switch does when a buffer fills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchMode {
    /// Credit/PFC-style backpressure: never drops.
    #[default]
    Lossless,
    /// Drop on overflow, retransmit after a timeout.
    Lossy,
}

impl SwitchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchMode::Lossless => "lossless",
            SwitchMode::Lossy => "lossy",
        }
    }
}

/// How lossy-mode senders limit what they have in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CongestionControl {
    /// A fixed window (when one is given), otherwise line rate.
    #[default]
    None,
    /// Additive increase (one packet per window delivered), multiplicative decrease (halve on
    /// every retransmission timeout), capped by the window.
    Aimd,
    /// TCP as Linux runs it: CUBIC with HyStart, acknowledgements that travel back through
    /// the queues, one connection per pair kept across transfers ([`super::tcp`]); in both
    /// switch modes.
    Cubic,
}

impl CongestionControl {
    pub fn as_str(self) -> &'static str {
        match self {
            CongestionControl::None => "none",
            CongestionControl::Aimd => "aimd",
            CongestionControl::Cubic => "cubic",
        }
    }
}

/// The MTU a link class gets when the scenario names none: 1500 B for Ethernet, 4 KiB for
/// NVLink, PCIe, InfiniBand and the rest.
pub fn default_mtu_bytes(class: LinkClass) -> u32 {
    match class {
        LinkClass::Ethernet => 1500,
        _ => 4096,
    }
}

/// Options of the packet model (the scenario's `[network]` table).
#[derive(Debug, Clone, PartialEq)]
pub struct PacketConfig {
    pub mode: SwitchMode,
    /// Per link class, in the order of [`LinkClass::ALL`].
    pub mtu_bytes: [u32; LinkClass::ALL.len()],
    /// Lossless: a buffer at or above this fraction of its capacity pauses its feeders...
    pub high_water: f64,
    /// ...until it drains to this fraction.
    pub low_water: f64,
    /// Lossy: time from a drop to its retransmission.
    pub retransmit_timeout: SimTime,
    /// Most bytes a flow may have in flight (sent, not yet delivered), in both modes.
    pub window_bytes: Option<u64>,
    pub congestion_control: CongestionControl,
    /// CUBIC: most bytes a connection keeps queued at its sender's own link (Linux's TCP small
    /// queues; the testbed's measured FIFO head). One packet may always wait there.
    pub host_queue_bytes: u64,
    /// Per link class, in the order of [`LinkClass::ALL`]: the depth of the token bucket of a
    /// shaper (tc's htb) on its links, as seconds at the link's rate; 0 for links without one
    /// (the profile's `network.shaper_burst`).
    pub shaper_burst_secs: [f64; LinkClass::ALL.len()],
    /// CUBIC: a receiver acknowledges once this many bytes of a connection have arrived since
    /// its last acknowledgement, at a message's last packet, and when everything its sender
    /// has sent so far has arrived; 0 acknowledges every packet. The testbed's receivers get
    /// whole GSO packets (veth does not cut them) and acknowledge each: the profile's
    /// `network.shaper_packet`.
    pub ack_every_bytes: u64,
}

/// A connection's queue at its sender's link when the scenario gives none: two 64 KiB
/// segmentation-offload packets, the floor of Linux's TCP small queues.
pub const DEFAULT_HOST_QUEUE_BYTES: u64 = 128 << 10;

/// Window AIMD starts from (and is capped by) when the scenario gives none.
pub const DEFAULT_AIMD_WINDOW_BYTES: u64 = 64 << 10;

impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            mode: SwitchMode::Lossless,
            mtu_bytes: LinkClass::ALL.map(default_mtu_bytes),
            high_water: 0.9,
            low_water: 0.7,
            retransmit_timeout: SimTime::from_us(100),
            window_bytes: None,
            congestion_control: CongestionControl::None,
            host_queue_bytes: DEFAULT_HOST_QUEUE_BYTES,
            shaper_burst_secs: [0.0; LinkClass::ALL.len()],
            ack_every_bytes: 0,
        }
    }
}

impl PacketConfig {
    pub fn mtu(&self, class: LinkClass) -> u32 {
        self.mtu_bytes[class_index(class)]
    }

    /// Seconds of a link's rate the bucket of a shaper on links of `class` holds; 0 for none.
    pub fn shaper_burst_secs(&self, class: LinkClass) -> f64 {
        self.shaper_burst_secs[class_index(class)]
    }

    /// Gives links of `class` a shaper whose bucket holds `secs` of their rate.
    pub fn set_shaper_burst_secs(&mut self, class: LinkClass, secs: f64) {
        self.shaper_burst_secs[class_index(class)] = secs;
    }
}

fn class_index(c: LinkClass) -> usize {
    LinkClass::ALL.iter().position(|&x| x == c).unwrap_or(0)
}
