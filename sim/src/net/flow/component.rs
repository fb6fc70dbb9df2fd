//! Which active batches must be solved together: those linked by shared links.
//!
//! A component is found from one batch (the one that started, lost flows or ended) by testing
//! every active batch against its members (pattern overlaps cached per pair of patterns), or,
//! with many batches active at once, through a link -> patterns -> active batches index; debug
//! builds check the two against each other.

use super::FlowModel;

impl FlowModel {
    fn patterns_overlap(&mut self, a: u32, b: u32) -> bool {
        if a == b {
            return !self.patterns[a as usize].link_set.is_empty();
        }
        let key = (a.min(b), a.max(b));
        if let Some(&o) = self.overlap.get(&key) {
            return o;
        }
        let (x, y) = (
            &self.patterns[a as usize].link_set,
            &self.patterns[b as usize].link_set,
        );
        let (mut i, mut j) = (0, 0);
        let mut shared = false;
        while i < x.len() && j < y.len() {
            match x[i].cmp(&y[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    shared = true;
                    break;
                }
            }
        }
        self.overlap.insert(key, shared);
        shared
    }

    /// Active batches connected to `seed` through shared links, sorted. Scanning costs
    /// members × active batches; the index costs the members' links (tens of thousands for one
    /// large ring step), so the scan wins until many batches are active at once (a training
    /// step's per-group collectives).
    pub(super) fn component(&mut self, seed: u32) -> Vec<u32> {
        const SCAN_MAX_ACTIVE: usize = 64;
        let comp = if self.active.len() <= SCAN_MAX_ACTIVE {
            self.component_scan(seed)
        } else {
            self.component_indexed(seed)
        };
        #[cfg(debug_assertions)]
        {
            let other = if self.active.len() <= SCAN_MAX_ACTIVE {
                self.component_indexed(seed)
            } else {
                self.component_scan(seed)
            };
            debug_assert_eq!(comp, other, "indexed and scanned components differ");
        }
        comp
    }

    fn component_indexed(&mut self, seed: u32) -> Vec<u32> {
        let mut comp = vec![seed];
        self.batches[seed as usize].mark = true;
        let mut seen_patterns: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < comp.len() {
            let pb = self.batches[comp[i] as usize].pattern as usize;
            for &l in &self.patterns[pb].link_set {
                for &p in &self.link_patterns[l as usize] {
                    if self.pattern_mark[p as usize] {
                        continue;
                    }
                    self.pattern_mark[p as usize] = true;
                    seen_patterns.push(p);
                    for &other in &self.active_by_pattern[p as usize] {
                        if !self.batches[other as usize].mark {
                            self.batches[other as usize].mark = true;
                            comp.push(other);
                        }
                    }
                }
            }
            i += 1;
        }
        for &b in &comp {
            self.batches[b as usize].mark = false;
        }
        for p in seen_patterns {
            self.pattern_mark[p as usize] = false;
        }
        comp.sort_unstable();
        comp
    }

    fn component_scan(&mut self, seed: u32) -> Vec<u32> {
        let mut comp = vec![seed];
        self.batches[seed as usize].mark = true;
        let mut i = 0;
        while i < comp.len() {
            let b = comp[i];
            let pb = self.batches[b as usize].pattern;
            for k in 0..self.active.len() {
                let other = self.active[k];
                if self.batches[other as usize].mark {
                    continue;
                }
                let po = self.batches[other as usize].pattern;
                if self.patterns_overlap(pb, po) {
                    self.batches[other as usize].mark = true;
                    comp.push(other);
                }
            }
            i += 1;
        }
        for &b in &comp {
            self.batches[b as usize].mark = false;
        }
        comp.sort_unstable();
        comp
    }
}
