//! Warp specialisation in the emulator: the two roles of a
//! [`Stmt::WarpSpecialize`] run as tasks that take turns.
//!
//! Lockstep cannot run a producer/consumer kernel: the producer would
//! issue every k-tile before any consumer ran and then wait forever for a
//! ring stage to be released. So each role is a task with its own
//! position (a stack of open statement lists and loops, with the lockstep
//! mask of each), run in lockstep within the role until it reaches an
//! `MbarrierWait` whose phase cannot complete yet; then the other role
//! runs. The roles alternate until both are done; when neither can move
//! it is a `Deadlock` naming the wait that cannot complete (a consumer
//! that never releases a stage, a producer that never fills one, a wrong
//! parity).
//!
//! What this order can and cannot see: by default each role runs as far
//! as it can before the other moves ([`RoleOrder::UntilBlocked`]), or the
//! roles take turns after every statement ([`RoleOrder::EveryStatement`]);
//! both are orders the hardware allows, far apart. The
//! mbarrier checks hold in every order (a read of a stage before its
//! phase completed is an `IncompleteRead`, since the copies land at the
//! wait; an arrival beyond a phase's count is an error); a role's
//! generic-proxy shared-memory accesses race-checked against the other
//! role's would need their own epochs, and the producer of the SM90
//! template touches shared memory only through TMA and mbarriers.

use super::*;

/// Where a role stands: open statement lists (innermost last).
struct Task<'k> {
    levels: Vec<Level<'k>>,
    /// The variables of the role's enclosing loops (swapped into the
    /// frame while the role runs).
    loop_vars: Vec<VarId>,
}

enum Level<'k> {
    /// `body[next..]` still to run for the `mask` threads.
    Block { body: &'k [Stmt], next: usize, mask: Vec<bool> },
    /// The `For` `st` with its `body`, which has just run for `live`.
    Loop { st: &'k Stmt, body: &'k [Stmt], live: Vec<bool> },
}

/// How far a turn got.
enum Turn {
    Done,
    /// Ran a statement and gave the other role its turn
    /// ([`RoleOrder::EveryStatement`]).
    Yielded,
    /// Stopped at a wait that cannot complete (its `Deadlock` error),
    /// after running at least one statement when `moved`.
    Blocked {
        wait: GpuError,
        moved: bool,
    },
}

impl<'k> Frame<'k> {
    /// Runs the `WarpSpecialize` `st` for the `mask` threads (the whole
    /// CTA; roles of whole warpgroups, see the module doc).
    pub(super) fn specialize(&mut self, st: &'k Stmt, mask: &[bool], args: &mut [Arg], s: Option<u32>) -> R<()> {
        let Stmt::WarpSpecialize { producer_threads, producer, consumer } = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not warp_specialize", st.head())));
        };
        let split = *producer_threads as usize;
        if mask.iter().any(|&m| !m) {
            return Err(self.err(Fault::Divergence, s, "warp_specialize reached by part of the CTA".into()));
        }
        if split == 0 || !split.is_multiple_of(128) || split >= self.threads {
            let msg = format!("a producer of {split} threads: whole warpgroups, fewer than the CTA's {}", self.threads);
            return Err(self.err(Fault::BadValue, s, msg));
        }
        let role = |lo: usize, hi: usize| -> Vec<bool> { (0..mask.len()).map(|t| (lo..hi).contains(&t)).collect() };
        let mut tasks = [(producer, role(0, split)), (consumer, role(split, self.threads))].map(|(body, mask)| Task {
            levels: vec![Level::Block { body: body.as_slice(), next: 0, mask }],
            loop_vars: Vec::new(),
        });
        let mut done = [false; 2];
        loop {
            let mut moved = false;
            let mut stuck = None;
            for (task, done) in tasks.iter_mut().zip(done.iter_mut()) {
                if *done {
                    continue;
                }
                std::mem::swap(&mut self.loop_vars, &mut task.loop_vars);
                let turn = self.turn(task, args);
                std::mem::swap(&mut self.loop_vars, &mut task.loop_vars);
                match turn? {
                    Turn::Done => (*done, moved) = (true, true),
                    Turn::Yielded => moved = true,
                    Turn::Blocked { wait, moved: m } => {
                        moved |= m;
                        stuck.get_or_insert(wait);
                    }
                }
            }
            if done.iter().all(|&d| d) {
                return Ok(());
            }
            if let (Some(wait), false) = (stuck, moved) {
                return Err(wait);
            }
        }
    }

    /// Runs `task` until it is done or waits on a phase that cannot
    /// complete yet.
    fn turn(&mut self, task: &mut Task<'k>, args: &mut [Arg]) -> R<Turn> {
        let mut moved = false;
        while let Some(level) = task.levels.last_mut() {
            match level {
                Level::Block { body, next, mask } => {
                    let body: &'k [Stmt] = body;
                    let Some(st) = body.get(*next) else {
                        task.levels.pop();
                        continue;
                    };
                    let s = self.id(st);
                    if !mask.iter().any(|&m| m) {
                        task.levels.pop();
                        continue;
                    }
                    match st {
                        Stmt::For { body, .. } => {
                            *next += 1;
                            let live = self.loop_enter(st, mask, s)?;
                            if live.iter().any(|&m| m) {
                                task.levels.push(Level::Loop { st, body, live: live.clone() });
                                task.levels.push(Level::Block { body, next: 0, mask: live });
                            }
                        }
                        Stmt::If { then, otherwise, .. } => {
                            *next += 1;
                            let (yes, no) = self.branch(st, mask, s)?;
                            task.levels.push(Level::Block { body: otherwise, next: 0, mask: no });
                            task.levels.push(Level::Block { body: then, next: 0, mask: yes });
                        }
                        Stmt::WarpSpecialize { .. } => {
                            return Err(self.err(Fault::Divergence, s, "warp_specialize inside a role".into()));
                        }
                        _ => {
                            // A wait whose phase cannot complete yet gives
                            // the other role its turn.
                            if matches!(st, Stmt::MbarrierWait { .. }) {
                                if let Some(wait) = self.wait_blocks(st, mask, s)? {
                                    return Ok(Turn::Blocked { wait, moved });
                                }
                            }
                            *next += 1;
                            self.stmt(st, mask, args)?;
                        }
                    }
                    moved = true;
                    if self.order == RoleOrder::EveryStatement {
                        return Ok(Turn::Yielded);
                    }
                }
                Level::Loop { st, body, live } => {
                    let (st, body, s) = (*st, *body, self.id(st));
                    self.loop_next(st, live, s)?;
                    if live.iter().any(|&m| m) {
                        let mask = live.clone();
                        task.levels.push(Level::Block { body, next: 0, mask });
                    } else {
                        task.levels.pop();
                    }
                }
            }
        }
        Ok(Turn::Done)
    }
}
