//! Links whose live flows changed since their component was last solved.
//!
//! A large component (a pipelined tree all-reduce over 512 nodes: ~4,400 flows in ~600
//! link-disjoint parts) is re-solved whenever one of its batches starts, loses flows or ends,
//! and the change touches a few of its parts. The model flags the links where a flow finished
//! during the instant; a batch that starts has no rates yet. [`SplitSolver::solve_changed`]
//! keeps the rates of every part that crosses no flagged link and has no new flow: max-min
//! rates of a part depend on nothing outside it, so they are the rates solving it again
//! would give, bit for bit. The flags are cleared when the instant settles: every component
//! a change touched has been re-solved by then.
//!
//! [`SplitSolver::solve_changed`]: crate::net::maxmin::SplitSolver::solve_changed

/// Per link, whether a flow on it finished since the last settle; each flagged link listed
/// once.
#[derive(Debug, Default)]
pub(super) struct ChangedLinks {
    flagged: Vec<bool>,
    list: Vec<u32>,
}

impl ChangedLinks {
    pub(super) fn new(links: usize) -> Self {
        ChangedLinks {
            flagged: vec![false; links],
            list: Vec::new(),
        }
    }

    /// Flags every link of a path.
    pub(super) fn flag(&mut self, path: &[u32]) {
        for &l in path {
            let flag = &mut self.flagged[l as usize];
            if !*flag {
                *flag = true;
                self.list.push(l);
            }
        }
    }

    /// The flags, indexed by link.
    pub(super) fn flags(&self) -> &[bool] {
        &self.flagged
    }

    pub(super) fn clear(&mut self) {
        for &l in &self.list {
            self.flagged[l as usize] = false;
        }
        self.list.clear();
    }
}
