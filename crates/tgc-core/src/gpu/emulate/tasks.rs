//! Tasks: how the emulator runs the CTAs of a cluster and the two roles of
//! a [`Stmt::WarpSpecialize`] concurrently.
//!
//! Lockstep cannot run a producer/consumer kernel: the producer would
//! issue every k-tile before any consumer ran and then wait forever for a
//! ring stage to be released; nor can it run a cluster, whose CTAs fill
//! each other's rings. So each CTA of a cluster is a task with its own
//! position (a stack of open statement lists and loops, with the lockstep
//! mask of each), and a `WarpSpecialize` parks its CTA's task while its
//! two roles run as tasks of their own. A task runs in lockstep until it
//! reaches an `MbarrierWait` whose phase cannot complete yet, or a
//! `barrier.cluster` that not every CTA of the cluster has reached; then
//! the next task runs. When no task can move it is a `Deadlock` naming a
//! wait that cannot complete (a consumer that never releases a stage, a
//! producer that never fills one, a wrong parity, a peer that exited
//! without meeting a `barrier.cluster`).
//!
//! A statement's effects on a peer CTA (a multicast box, a remote
//! arrival: [`Remote`]) are delivered when its task's turn ends, as the
//! hardware delivers them some time after the instruction issues; one
//! that reaches a CTA that has exited is a `Race`.
//!
//! What this order can and cannot see: by default each task runs as far
//! as it can before the next moves ([`RoleOrder::UntilBlocked`]), or the
//! tasks take turns after every statement ([`RoleOrder::EveryStatement`]);
//! both are orders the hardware allows, far apart. The
//! mbarrier checks hold in every order (a read of a stage before its
//! phase completed is an `IncompleteRead`, since the copies land at the
//! wait; an arrival beyond a phase's count is an error); a role's
//! generic-proxy shared-memory accesses race-checked against the other
//! role's would need their own epochs, and the producer of the SM90
//! template touches shared memory only through TMA and mbarriers.

use super::*;

/// Where a task stands: open statement lists (innermost last).
struct Task<'k> {
    /// The CTA's rank in its cluster (its frame).
    cta: usize,
    /// The CTA's task whose `WarpSpecialize` this role runs, `None` for a
    /// CTA's own.
    parent: Option<usize>,
    levels: Vec<Level<'k>>,
    /// The variables of the task's enclosing loops (swapped into the
    /// frame while the task runs).
    loop_vars: Vec<VarId>,
    state: State,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// Arrived at the `barrier.cluster` `s` as the CTA's `n`-th; waits for
    /// every CTA of the cluster to have arrived `n` times.
    AtClusterSync {
        n: u32,
        s: Option<u32>,
    },
    /// Every CTA arrived: the next turn passes the `barrier.cluster`.
    ClusterSyncDone,
    /// Parked while its `WarpSpecialize`'s roles run (how many are left).
    Joining(u8),
    Done,
}

enum Level<'k> {
    /// `body[next..]` still to run for the `mask` threads.
    Block { body: &'k [Stmt], next: usize, mask: Vec<bool> },
    /// The `For` `st` with its `body`, which has just run for `live`.
    Loop { st: &'k Stmt, body: &'k [Stmt], live: Vec<bool> },
}

/// How far a turn got.
enum Turn<'k> {
    Done,
    /// Ran a statement and gave the next task its turn
    /// ([`RoleOrder::EveryStatement`]).
    Yielded,
    /// Stopped at a wait that cannot complete (its `Deadlock` error),
    /// after running at least one statement when `moved`.
    Blocked {
        wait: GpuError,
        moved: bool,
    },
    /// Reached the `barrier.cluster` `s` (not run yet).
    ClusterSync {
        s: Option<u32>,
    },
    /// Reached a `WarpSpecialize`: its producer's threads are
    /// `0..split`, the consumer's the rest of the CTA.
    Specialize {
        producer: &'k [Stmt],
        consumer: &'k [Stmt],
        split: usize,
    },
}

/// Runs `body` on the CTAs of one cluster (`frames`, by rank) until every
/// one is done.
pub(super) fn run_cluster<'k>(frames: &mut [Frame<'k>], body: &'k [Stmt], args: &mut [Arg]) -> R<()> {
    let mut tasks: Vec<Task<'k>> =
        frames.iter().enumerate().map(|(cta, f)| Task::new(cta, None, body, vec![true; f.threads])).collect();
    loop {
        let (mut moved, mut stuck) = (false, Vec::new());
        for i in 0..tasks.len() {
            let cta = tasks[i].cta;
            match tasks[i].state {
                State::Running | State::ClusterSyncDone => {}
                State::Joining(_) | State::Done => continue,
                State::AtClusterSync { n, s } => {
                    let missing: Vec<usize> = (0..frames.len()).filter(|&r| frames[r].cluster_arrivals < n).collect();
                    if missing.is_empty() {
                        tasks[i].state = State::ClusterSyncDone;
                    } else {
                        let msg = format!("barrier.cluster: CTAs {missing:?} of the cluster have not reached it");
                        stuck.push(frames[cta].err(Fault::Deadlock, s, msg));
                        continue;
                    }
                }
            }
            let f = &mut frames[cta];
            std::mem::swap(&mut f.loop_vars, &mut tasks[i].loop_vars);
            let turn = f.turn(&mut tasks[i], args);
            std::mem::swap(&mut f.loop_vars, &mut tasks[i].loop_vars);
            let turn = turn?;
            for r in std::mem::take(&mut frames[cta].outbox) {
                let to = r.cta();
                frames[to].receive(r)?;
            }
            match turn {
                Turn::Done => {
                    moved = true;
                    tasks[i].state = State::Done;
                    match tasks[i].parent {
                        Some(p) => {
                            if let State::Joining(left) = &mut tasks[p].state {
                                *left -= 1;
                                if *left == 0 {
                                    tasks[p].state = State::Running;
                                }
                            }
                        }
                        None => {
                            let f = &mut frames[cta];
                            if f.received_since_sync {
                                let msg = "exits after a peer reached its shared memory with no barrier.cluster \
                                           since: the peer may still be sending to it";
                                return Err(f.err(Fault::Race, None, msg.into()));
                            }
                            f.exited = true;
                        }
                    }
                }
                Turn::Yielded => moved = true,
                Turn::Blocked { wait, moved: m } => {
                    moved |= m;
                    stuck.push(wait);
                }
                Turn::ClusterSync { s } => {
                    // Arriving is progress; passing waits for the others.
                    moved = true;
                    frames[cta].cluster_arrivals += 1;
                    tasks[i].state = State::AtClusterSync { n: frames[cta].cluster_arrivals, s };
                }
                Turn::Specialize { producer, consumer, split } => {
                    moved = true;
                    let threads = frames[cta].threads;
                    let role =
                        |lo: usize, hi: usize| -> Vec<bool> { (0..threads).map(|t| (lo..hi).contains(&t)).collect() };
                    tasks[i].state = State::Joining(2);
                    tasks.push(Task::new(cta, Some(i), producer, role(0, split)));
                    tasks.push(Task::new(cta, Some(i), consumer, role(split, threads)));
                }
            }
        }
        if tasks.iter().all(|t| t.state == State::Done) {
            return Ok(());
        }
        if !moved {
            return Err(deadlock(stuck));
        }
    }
}

/// The `Deadlock` of tasks that all wait: the first wait's, naming the
/// others' too (the one that cannot complete first may be any of them).
fn deadlock(stuck: Vec<GpuError>) -> GpuError {
    let mut waits = stuck.into_iter();
    let Some(mut e) = waits.next() else {
        return GpuError::new(Fault::Deadlock, None, "no task of the cluster can move");
    };
    let others: Vec<String> = waits.map(|w| w.to_string()).collect();
    if !others.is_empty() {
        e.message = format!("{}; the other tasks wait too: {}", e.message, others.join("; "));
    }
    e
}

impl<'k> Task<'k> {
    fn new(cta: usize, parent: Option<usize>, body: &'k [Stmt], mask: Vec<bool>) -> Task<'k> {
        Task {
            cta,
            parent,
            levels: vec![Level::Block { body, next: 0, mask }],
            loop_vars: Vec::new(),
            state: State::Running,
        }
    }
}

impl<'k> Frame<'k> {
    /// Runs `task` until it is done, waits on a phase that cannot complete
    /// yet, reaches a `barrier.cluster` or a `WarpSpecialize`.
    fn turn(&mut self, task: &mut Task<'k>, args: &mut [Arg]) -> R<Turn<'k>> {
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
                        Stmt::WarpSpecialize { producer_threads, producer, consumer } => {
                            if task.parent.is_some() {
                                return Err(self.err(Fault::Divergence, s, "warp_specialize inside a role".into()));
                            }
                            let split = *producer_threads as usize;
                            if mask.iter().any(|&m| !m) {
                                let msg = "warp_specialize reached by part of the CTA".into();
                                return Err(self.err(Fault::Divergence, s, msg));
                            }
                            if split == 0 || !split.is_multiple_of(128) || split >= self.threads {
                                let msg = format!(
                                    "a producer of {split} threads: whole warpgroups, fewer than the CTA's {}",
                                    self.threads
                                );
                                return Err(self.err(Fault::BadValue, s, msg));
                            }
                            *next += 1;
                            return Ok(Turn::Specialize { producer, consumer, split });
                        }
                        Stmt::Sm90(Sm90Stmt::ClusterSync) if task.state != State::ClusterSyncDone => {
                            return Ok(Turn::ClusterSync { s });
                        }
                        Stmt::Let { .. }
                        | Stmt::Barrier
                        | Stmt::BarrierNamed { .. }
                        | Stmt::Mma(_)
                        | Stmt::Simt(_)
                        | Stmt::Sm90(_) => {
                            // A wait whose phase cannot complete yet gives
                            // the next task its turn.
                            if matches!(st, Stmt::Sm90(Sm90Stmt::MbarrierWait { .. })) {
                                if let Some(wait) = self.wait_blocks(st, mask, s)? {
                                    return Ok(Turn::Blocked { wait, moved });
                                }
                            }
                            if matches!(st, Stmt::Sm90(Sm90Stmt::ClusterSync)) {
                                task.state = State::Running;
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
