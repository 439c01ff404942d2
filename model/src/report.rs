//! Readable reports of explorations: what each step of a path did on the
//! fabric, for counterexamples printed by the CLI and the Explorer.

use nessie_protocol::Op;

use crate::world::{Action, World, WorldState};

fn op(request: &Op) -> String {
    match request {
        Op::Read { addr, len } => format!("RDMA READ {len} B at {addr}"),
        Op::Write { addr, data } => format!("RDMA WRITE {} B at {addr}", data.len()),
        Op::Cas { addr, expect, new } => {
            format!("RDMA CAS at {addr}: {expect:#018x} -> {new:#018x}")
        }
        Op::LocalRead { offset, len } => {
            format!("CPU read {len} B of the local data table at {offset:#x}")
        }
        Op::LocalWrite { offset, data } => format!(
            "CPU write {} B to the local data table at {offset:#x}",
            data.len()
        ),
        Op::Windowed {
            window,
            key,
            op: inner,
        } => {
            format!("{} through {window} under key {}", op(inner), key.0)
        }
        Op::BindWindow { index, offset, len } => format!(
            "agent binds window {index} over {len} B of the local data table at {offset:#x}"
        ),
    }
}

/// What `action` does from state `before`.
pub fn describe(world: &World, before: &WorldState, action: &Action) -> String {
    let client = |c: usize| &before.clients[c];
    match action {
        Action::Delay(c, k) => {
            let mut after = before.clone();
            after.clock += u64::from(*k) * world.tick.as_nanos() as u64;
            format!(
                "time passes: {k} tick(s), to {} ns; then {}",
                after.clock,
                describe(world, &after, &Action::Poll(*c))
            )
        }
        Action::Crash(c) => format!("client {c} crashes"),
        Action::Drop(c, i) => format!(
            "crashed client {c}'s {} is dropped (never lands)",
            op(&client(*c).pending[*i].wr.op)
        ),
        Action::Fault(c, i, f) => format!(
            "client {c}: {} hit by {f}",
            op(&client(*c).pending[*i].wr.op)
        ),
        Action::Land(c, i) => format!(
            "client {c}: {} lands late",
            op(&client(*c).orphans[*i].wr.op)
        ),
        Action::Agent(n) => {
            format!("node {n}'s agent binds the windows its clients without storage asked for")
        }
        Action::Deliver(c, i) => format!(
            "client {c}: the held completion of request {} arrives",
            client(*c).late[*i].id.0
        ),
        Action::Step(c, i) => {
            let f = &client(*c).pending[*i];
            if f.words > 0 {
                format!("client {c}: next word of {}", op(&f.wr.op))
            } else {
                format!("client {c}: {}", op(&f.wr.op))
            }
        }
        Action::Poll(c) => {
            let r = client(*c);
            if r.machine.is_some() {
                return format!("client {c}: processes its completions, decides its next step");
            }
            let o = &world.clients[*c].program[usize::from(r.next)];
            let k = String::from_utf8_lossy(o.key());
            let what = match o {
                nessie_protocol::Request::Put(_, v) => {
                    format!("PUT {k}={}", String::from_utf8_lossy(v))
                }
                other => format!("{} {k}", other.name().to_uppercase()),
            };
            format!("client {c}: starts {what} (attempt {})", r.attempts + 1)
        }
    }
}

/// A numbered, step-by-step trace of a path of `(state before, action)` pairs.
pub fn trace(world: &World, steps: &[(WorldState, Action)]) -> String {
    let mut out = String::new();
    for (i, (s, a)) in steps.iter().enumerate() {
        out.push_str(&format!("{:>4}. {}\n", i + 1, describe(world, s, a)));
    }
    out
}
