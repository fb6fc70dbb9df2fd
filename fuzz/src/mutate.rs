//! A seeded, structure-aware text mutator: it knows what the inputs are made of (numbers,
//! quoted strings, lines, brackets) and swaps in the values that break parsers (0, -1, 2^32,
//! 2^64, 1e30, 1e-300, NaN, "1bps", "4294967296GiB", "{i}"), rather than flipping random bits
//! that a tokenizer rejects on the first byte.
//!
//! Same seed, same mutations: a failing case is reproduced by its (target, seed, case index).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Numbers that sit on the edges of the types and ranges parsers use.
pub const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "2",
    "3",
    "0.5",
    "3.5",
    "65536",
    "1000006",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e9",
    "1e30",
    "-1e30",
    "1e308",
    "1e-300",
    "NaN",
    "nan",
    "inf",
    "-inf",
];

/// Strings that mean something to one parser or another, or nothing at all.
pub const STRINGS: &[&str] = &[
    "",
    "x",
    " ",
    "1bps",
    "1e-300Gbps",
    "0Gbps",
    "1e30Tbps",
    "4294967296GiB",
    "1e30B",
    "-5B",
    "1ps",
    "1000000s",
    "-1us",
    "{i}",
    "{i}{i}",
    "ring",
    "direct",
    "double_binary_tree",
    "hierarchical",
    "parameter_server",
    "nccl",
    "gloo",
    "mpi",
    "ideal",
    "nvls",
    "tree",
    "simple",
    "ll128",
    "all_to_all",
    "send_recv",
    "barrier",
    "recursive_doubling",
    "two_proc",
    "nvlink",
    "pcie",
    "ethernet",
    "infiniband",
    "gpu",
    "switch",
    "nic",
    "fat_tree",
    "rail_optimized",
    "ring",
    "packet",
    "flow",
    "../nowhere.toml",
    "/dev/null",
    "NaN",
    "µs",
    "\u{0}",
    "\"",
    "\\",
];

/// Characters that open, close or separate structure in TOML, JSON and CSV.
const STRUCTURE: &[&str] = &[
    "[", "]", "{", "}", "\"", ",", "=", ":", "\n", "#", "[[", "]]", "'", ".", "-", " ",
];

pub struct Mutator {
    rng: ChaCha8Rng,
}

impl Mutator {
    pub fn new(seed: u64) -> Self {
        Mutator {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// One to four mutations of `text`; `donors` are other inputs of the same kind, for splices.
    pub fn mutate(&mut self, text: &str, donors: &[String]) -> String {
        let mut t = text.to_string();
        let n = self.rng.random_range(1..=4);
        for _ in 0..n {
            t = match self.rng.random_range(0..10) {
                0..=2 => self.swap_number(&t),
                3..=4 => self.swap_string(&t),
                5 => self.edit_lines(&t),
                6 => self.truncate(&t),
                7 => self.insert_structure(&t),
                8 => self.splice(&t, donors),
                _ => self.repeat_block(&t),
            };
        }
        t
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.random_range(0..xs.len())]
    }

    /// A random char boundary of `t`.
    fn boundary(&mut self, t: &str) -> usize {
        if t.is_empty() {
            return 0;
        }
        let mut i = self.rng.random_range(0..=t.len());
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        i
    }

    /// Replaces one number token with an edge value.
    fn swap_number(&mut self, t: &str) -> String {
        let spans = number_spans(t);
        if spans.is_empty() {
            return self.insert_structure(t);
        }
        let (a, b) = spans[self.rng.random_range(0..spans.len())];
        let v = self.pick(NUMBERS);
        format!("{}{v}{}", &t[..a], &t[b..])
    }

    /// Replaces the contents of one double-quoted string.
    fn swap_string(&mut self, t: &str) -> String {
        let spans = string_spans(t);
        if spans.is_empty() {
            return self.swap_number(t);
        }
        let (a, b) = spans[self.rng.random_range(0..spans.len())];
        let v = self.pick(STRINGS);
        format!("{}{v}{}", &t[..a], &t[b..])
    }

    /// Deletes, duplicates or swaps lines.
    fn edit_lines(&mut self, t: &str) -> String {
        let mut lines: Vec<&str> = t.split('\n').collect();
        if lines.is_empty() {
            return String::new();
        }
        let i = self.rng.random_range(0..lines.len());
        match self.rng.random_range(0..3) {
            0 => {
                lines.remove(i);
            }
            1 => lines.insert(i, lines[i]),
            _ => {
                let j = self.rng.random_range(0..lines.len());
                lines.swap(i, j);
            }
        }
        lines.join("\n")
    }

    fn truncate(&mut self, t: &str) -> String {
        let i = self.boundary(t);
        t[..i].to_string()
    }

    fn insert_structure(&mut self, t: &str) -> String {
        let i = self.boundary(t);
        let s = self.pick(STRUCTURE);
        format!("{}{s}{}", &t[..i], &t[i..])
    }

    /// Inserts a line of another input of the same kind.
    fn splice(&mut self, t: &str, donors: &[String]) -> String {
        if donors.is_empty() {
            return self.edit_lines(t);
        }
        let d = &donors[self.rng.random_range(0..donors.len())];
        let dl: Vec<&str> = d.split('\n').collect();
        let line = dl[self.rng.random_range(0..dl.len())];
        let mut lines: Vec<&str> = t.split('\n').collect();
        let i = self.rng.random_range(0..=lines.len());
        lines.insert(i, line);
        lines.join("\n")
    }

    /// Repeats a short stretch of text (array entries, table rows) a few times.
    fn repeat_block(&mut self, t: &str) -> String {
        let a = self.boundary(t);
        let mut b = (self.boundary(&t[a..]) + a).min(a + 200);
        while !t.is_char_boundary(b) {
            b -= 1;
        }
        let block = &t[a..b];
        let times = self.rng.random_range(2..8);
        format!("{}{}{}", &t[..a], block.repeat(times), &t[a..])
    }
}

/// Byte spans of number tokens: a digit run (with `.`, `e`, `+`, `-`, `_` inside), with a
/// leading `-` when there is one.
pub fn number_spans(t: &str) -> Vec<(usize, usize)> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric())) {
            let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            let mut j = i;
            while j < b.len()
                && (b[j].is_ascii_digit()
                    || b[j] == b'.'
                    || b[j] == b'_'
                    || ((b[j] == b'e' || b[j] == b'E')
                        && j + 1 < b.len()
                        && (b[j + 1].is_ascii_digit() || b[j + 1] == b'-' || b[j + 1] == b'+'))
                    || ((b[j] == b'-' || b[j] == b'+') && (b[j - 1] == b'e' || b[j - 1] == b'E')))
            {
                j += 1;
            }
            out.push((start, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Byte spans of the contents of double-quoted strings (without the quotes; no escapes).
pub fn string_spans(t: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<usize> = None;
    for (i, c) in t.char_indices() {
        match (c, open) {
            ('"', None) => open = Some(i + 1),
            ('"', Some(a)) => {
                out.push((a, i));
                open = None;
            }
            ('\n', Some(_)) => open = None,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings_are_found_where_they_are() {
        let t = "bytes = \"16MiB\"\nn = -12\nx = 1.5e-3\nname10 = 3";
        let nums: Vec<&str> = number_spans(t).iter().map(|&(a, b)| &t[a..b]).collect();
        assert_eq!(nums, ["16", "-12", "1.5e-3", "3"]);
        let strs: Vec<&str> = string_spans(t).iter().map(|&(a, b)| &t[a..b]).collect();
        assert_eq!(strs, ["16MiB"]);
    }

    #[test]
    fn the_same_seed_gives_the_same_mutants() {
        let t = "a = 1\nb = \"x\"\n[c]\nd = [1, 2, 3]\n";
        let run = |seed| {
            let mut m = Mutator::new(seed);
            (0..50).map(|_| m.mutate(t, &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
