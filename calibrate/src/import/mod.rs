//! Importers for measurements users already have; each reads one log format into plain data.

pub mod cpu_costs;
pub mod eager;
pub mod fanout;
pub mod gpu_measurements;
pub mod host_costs;
pub mod iperf3;
pub mod kineto;
pub mod layer_times;
pub mod nccl_tests;
pub mod p2p;
pub mod packet_wait;
pub mod shaper;
pub mod shaper_packet;
pub mod torch_device;
pub mod validation_csv;
pub mod wake_ups;
