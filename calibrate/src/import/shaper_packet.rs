//! `suite.py capture_mpi` / `capture_gloo` logs (testbed/workloads): the packets TCP handed a
//! shaper, as tcpdump saw them leave each host; the largest is what one message can pass
//! through the shaper whole.
//!
//! The log: `{"messages": [{"kind": "data" | "answer" | "other", "bytes": N, "packets": [[t,
//! bytes], ...]}, ...], ...}`: every message the capture saw, with the packets (GSO segments
//! handed to the qdisc) its data left in, where the capture listed them. The fit: the largest
//! packet over every listed packet of every log (Linux builds GSO packets of up to 64 KiB of
//! headers and payload, 45 segments of 1,448 B at the testbed's MSS: 65,160 B), with how many
//! packets reached it, so the provenance says how often TCP sent that much at once.

use serde::Deserialize;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub bytes: u64,
    /// (seconds, bytes) of each packet the message's data left in; absent where the capture
    /// did not list them.
    #[serde(default)]
    pub packets: Vec<(f64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Capture {
    pub messages: Vec<Message>,
}

/// The largest packet over the captures, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct LargestPacket {
    pub bytes: u64,
    /// Packets of that size, and packets listed in all.
    pub at_largest: usize,
    pub packets: usize,
    /// Per capture, its largest packet.
    pub per_capture: Vec<u64>,
}

pub fn parse(text: &str, file: &str) -> Result<Capture, ImportError> {
    let capture: Capture = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/suite.py capture_mpi or capture_gloo ({e})"),
        )
    })?;
    for (i, m) in capture.messages.iter().enumerate() {
        if m.packets.iter().any(|&(_, b)| b == 0 || b > m.bytes) {
            return Err(ImportError::whole(
                file,
                format!(
                    "messages[{i}].packets: packets of 1 to `bytes` ({}) bytes",
                    m.bytes
                ),
            ));
        }
    }
    if capture.messages.iter().all(|m| m.packets.is_empty()) {
        return Err(ImportError::whole(
            file,
            "`messages[].packets`: at least one message with its packets listed (a capture \
             made since suite.py lists them)",
        ));
    }
    Ok(capture)
}

/// Reads every capture and finds the largest packet over them all.
pub fn load_all(paths: &[std::path::PathBuf]) -> Result<LargestPacket, ImportError> {
    let mut captures = Vec::new();
    for p in paths {
        let file = p.display().to_string();
        captures.push(parse(&read_text(p)?, &file)?);
    }
    Ok(largest(&captures))
}

pub fn largest(captures: &[Capture]) -> LargestPacket {
    let sizes = |c: &Capture| {
        c.messages
            .iter()
            .flat_map(|m| m.packets.iter().map(|&(_, b)| b))
            .collect::<Vec<u64>>()
    };
    let per_capture: Vec<u64> = captures
        .iter()
        .map(|c| sizes(c).into_iter().max().unwrap_or(0))
        .collect();
    let bytes = per_capture.iter().copied().max().unwrap_or(0);
    let all: Vec<u64> = captures.iter().flat_map(sizes).collect();
    LargestPacket {
        bytes,
        at_largest: all.iter().filter(|&&b| b == bytes).count(),
        packets: all.len(),
        per_capture,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_packet_over_every_capture_is_taken_with_how_often_it_was_seen() {
        let a = parse(
            r#"{"messages": [{"kind": "data", "bytes": 131072,
                 "packets": [[0.0, 65160], [0.001, 65160], [0.002, 752]]},
                {"kind": "other", "bytes": 40}]}"#,
            "a.json",
        )
        .unwrap();
        let b = parse(
            r#"{"messages": [{"kind": "data", "bytes": 43714, "packets": [[0.0, 43714]]}]}"#,
            "b.json",
        )
        .unwrap();
        let fit = largest(&[a, b]);
        assert_eq!(fit.bytes, 65160);
        assert_eq!((fit.at_largest, fit.packets), (2, 4));
        assert_eq!(fit.per_capture, vec![65160, 43714]);
    }

    #[test]
    fn a_capture_without_packets_or_with_a_packet_larger_than_its_message_is_refused() {
        let e = parse(
            r#"{"messages": [{"kind": "data", "bytes": 100}]}"#,
            "c.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("c.json"), "{e}");
        assert!(e.to_string().contains("packets"), "{e}");
        let e = parse(
            r#"{"messages": [{"kind": "data", "bytes": 100, "packets": [[0.0, 200]]}]}"#,
            "d.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("messages[0].packets"), "{e}");
    }
}
