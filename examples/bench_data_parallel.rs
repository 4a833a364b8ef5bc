//! Data-parallel training of the MLP 784-128(ReLU)-10 (softmax cross-entropy, Adam) in global
//! batches of 1024 cut into 8 shards of 128, on 1, 2, 4 and 8 processes: the bytes each process
//! sends and receives per step against a ring all-reduce's, and the state after a few steps,
//! which must be the same bits for every number of processes. Then a model of the step time
//! on 10 and 100 Gbit/s links for up to 64 processes, from this run's compute times and bytes.
//!
//! ```text
//! cargo run --release --features mpi --example bench_data_parallel
//! ```
//!
//! Without the feature `mpi` it runs the one-process part (gradient accumulation over the 8
//! shards) and the model. With it, it starts itself under `mpirun -np P` (oversubscribed where
//! the machine has fewer cores: those runs measure bytes and bits, not speed). It exits with an
//! error if a process sends or receives more than 2.1 times a ring's `2 (P - 1) / P` of the
//! gradient's bytes per step, or if the states differ.

#[path = "support/state.rs"]
mod state;
#[path = "support/timing.rs"]
mod timing;

use fusegraph::distributed::{add_shard, Communicator, DataParallel, Shards, Solo};
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use state::state_hash;
use std::cell::Cell;
use timing::{measure, stats, value, Variant};

/// The most samples of a shard.
const B: usize = 128;
/// Shards of a global batch of 1024 in the measured runs.
const SHARDS: usize = 8;
/// Steps of the measured runs.
const STEPS: usize = 6;
/// The processes of the measured runs.
const PROCESSES: [usize; 4] = [1, 2, 4, 8];
/// Synthetic samples the steps cycle through.
const SAMPLES: usize = 4096;
/// The most bytes a process may send or receive per step, in units of a ring all-reduce's.
const MAX_OF_RING: f64 = 2.1;

/// The MLP of the benchmark suite (`bench_train`).
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Mnist {
    fc1: Dense<784, 128, Relu>,
    fc2: Dense<128, 10>,
}

/// A communicator that counts the bytes this process hands it to send to the others and
/// receives from them (a broadcast is not counted: the runs do not broadcast).
struct Counted<C> {
    inner: C,
    sent: Cell<usize>,
    received: Cell<usize>,
}

impl<C: Communicator> Counted<C> {
    fn new(inner: C) -> Self {
        Counted {
            inner,
            sent: Cell::new(0),
            received: Cell::new(0),
        }
    }

    fn count(&self, sent: usize, received: usize) {
        self.sent.set(self.sent.get() + sent);
        self.received.set(self.received.get() + received);
    }
}

impl<C: Communicator> Communicator for Counted<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        let others = self.size() - 1;
        self.count(4 * mine.len() * others, 4 * (all.len() - mine.len()));
        self.inner.all_gather(mine, all);
    }
    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
        let others = self.size() - 1;
        self.count(8 * mine.len() * others, 8 * (all.len() - mine.len()));
        self.inner.all_gather_u64(mine, all);
    }
    fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
        let block = send.len() / self.size();
        let others = 4 * block * (self.size() - 1);
        self.count(others, others);
        self.inner.all_to_all(send, recv);
    }
    fn broadcast(&self, values: &mut [f32]) {
        self.inner.broadcast(values);
    }
    fn broadcast_u64(&self, values: &mut [u64]) {
        self.inner.broadcast_u64(values);
    }
    fn abort(&self, code: i32) -> ! {
        self.inner.abort(code)
    }
}

fn data() -> (Vec<f32>, Vec<u32>) {
    let x = (0..SAMPLES * 784).map(value).collect();
    let y = (0..SAMPLES).map(|i| (i * 7 % 10) as u32).collect();
    (x, y)
}

/// The global batch of `global` samples for step `i`.
fn batch<'a>(x: &'a [f32], y: &'a [u32], i: usize, global: usize) -> (&'a [f32], &'a [u32]) {
    let at = i * global % SAMPLES;
    (&x[at * 784..(at + global) * 784], &y[at..at + global])
}

/// What one process of a measured run saw: bytes sent and received per step, the state.
struct Measured {
    sent: usize,
    received: usize,
    state: u64,
}

/// `STEPS` steps of global batches of `SHARDS x B` on `comm`'s processes, counted.
fn run<C: Communicator>(comm: C) -> Measured {
    let (x, y) = data();
    let mut model = Mnist::init(Seed(1));
    let mut step = TrainStep::<Mnist, Adam, B>::new(&model, Adam::default());
    let shards = Shards::new(SHARDS, B);
    let mut dp = DataParallel::new(Counted::new(comm), shards).expect("shards");
    for i in 0..STEPS {
        let (xs, ys) = batch(&x, &y, i, shards.global_batch());
        dp.run(&mut model, &mut step, xs, ys);
    }
    let counted = dp.communicator();
    Measured {
        sent: counted.sent.get() / STEPS,
        received: counted.received.get() / STEPS,
        state: state_hash(&model, &step),
    }
}

/// Compute times on one thread, in seconds: of a shard within a step (its gradients and its
/// leaf of the shards' sum), of the rest of a step (the update), and of one leaf alone.
struct Compute {
    shard: f64,
    rest: f64,
    leaf: f64,
}

/// Times a step of one shard of `samples` and a step of `shards` of them (accumulated on one
/// process), and one leaf of the sum, interleaved; prints their medians. The difference of the
/// two steps is `shards - 1` shards.
fn compute_times(samples: usize, shards: usize) -> Compute {
    let (x, y) = data();
    let (mut sum, gradient) = (vec![0.0; Mnist::TRAINABLE], vec![0.5; Mnist::TRAINABLE]);
    let mut steps = [1, shards].map(|count| {
        let model = Mnist::init(Seed(1));
        let step = TrainStep::<Mnist, Adam, B>::new(&model, Adam::default());
        let dp = DataParallel::new(Solo, Shards::new(count, samples)).expect("shards");
        (count, model, step, dp, 0)
    });
    let mut variants: Vec<Variant<'_>> = steps
        .iter_mut()
        .map(|(count, model, step, dp, i)| {
            let (x, y) = (&x, &y);
            let global = *count * samples;
            Variant::new(format!("a step of {count} x {samples}"), move || {
                let (xs, ys) = batch(x, y, *i, global);
                dp.run(model, step, xs, ys);
                *i += 1;
            })
        })
        .collect();
    variants.push(Variant::new("a leaf of the sum", || {
        add_shard(&mut sum, &gradient, 0.25, false)
    }));
    measure(&mut variants, 2);
    println!("\nOne process, one thread (medians):");
    for v in &variants {
        println!("  {:<24} {:>9.3} ms", v.name, stats(v).0 * 1e3);
    }
    let [one, all, leaf] = [0, 1, 2].map(|k| stats(&variants[k]).0);
    let shard = (all - one) / (shards - 1) as f64;
    Compute {
        shard,
        rest: (one - shard).max(0.0),
        leaf,
    }
}

/// Whether `mpirun` started this process (OpenMPI or MPICH).
fn under_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// This process as one rank of an MPI job, one thread: rank 0 prints one line,
/// `processes P sent S received R state H` with the largest counts of any process.
#[cfg(feature = "mpi")]
fn as_rank() -> std::process::ExitCode {
    let mpi = fusegraph::distributed::Mpi::init().expect("MPI");
    // One thread, the main one: MPI's calls stay on the thread that initialized it.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("the global pool");
    let world = mpi.world();
    let measured = run(mpi.world());
    let mine = [
        measured.sent as u64,
        measured.received as u64,
        measured.state,
    ];
    let mut all = vec![0; 3 * world.size()];
    world.all_gather_u64(&mine, &mut all);
    let column = |c: usize| all.iter().skip(c).step_by(3);
    let states: std::collections::BTreeSet<_> = column(2).collect();
    let outcome = if states.len() == 1 {
        if world.rank() == 0 {
            println!(
                "processes {} sent {} received {} state {:016x}",
                world.size(),
                column(0).max().unwrap(),
                column(1).max().unwrap(),
                measured.state
            );
        }
        Ok(())
    } else {
        Err(format!(
            "the processes end with different states: {states:x?}"
        ))
    };
    mpi.finish(outcome)
}

/// Runs this program under `mpirun -np processes` and reads its line.
#[cfg(feature = "mpi")]
fn on_processes(processes: usize) -> Measured {
    let exe = std::env::current_exe().expect("this program's path");
    let out = std::process::Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", &processes.to_string()])
        .arg(exe)
        .output()
        .expect("mpirun");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mpirun -np {processes}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("processes "))
        .expect("rank 0's line");
    let words: Vec<&str> = line.split_whitespace().collect();
    Measured {
        sent: words[3].parse().expect("bytes"),
        received: words[5].parse().expect("bytes"),
        state: u64::from_str_radix(words[7], 16).expect("a hash"),
    }
}

/// The measured runs: one process in this one, the others under `mpirun`.
fn measured_runs() -> Vec<(usize, Measured)> {
    let mut runs = vec![(1, run(Solo))];
    runs.extend(
        PROCESSES
            .into_iter()
            .skip(1)
            .filter_map(on_processes_if_built),
    );
    runs
}

/// The run on `processes` processes, with the feature `mpi`.
#[cfg(feature = "mpi")]
fn on_processes_if_built(processes: usize) -> Option<(usize, Measured)> {
    Some((processes, on_processes(processes)))
}

/// Without the feature `mpi`, no run on several processes.
#[cfg(not(feature = "mpi"))]
fn on_processes_if_built(processes: usize) -> Option<(usize, Measured)> {
    println!("({processes} processes: build with --features mpi)");
    None
}

/// Prints the bytes and states of the runs; an error if a run sends too much or ends in
/// another state than the one-process run.
fn report(runs: &[(usize, Measured)]) -> Result<(), String> {
    let gradient = Mnist::TRAINABLE * 4;
    println!(
        "\nMLP 784-128-10, Adam, global batches of {} in {SHARDS} shards, {STEPS} steps; \
         a gradient is {gradient} bytes",
        SHARDS * B
    );
    println!(
        "  {:>9} {:>12} {:>12} {:>14} {:>18}",
        "processes", "bytes sent", "received", "/ ring's", "state"
    );
    let mut failures = Vec::new();
    for (p, m) in runs {
        let ring = 2.0 * (*p as f64 - 1.0) / *p as f64 * gradient as f64;
        let of_ring = m.sent.max(m.received) as f64 / ring;
        let shown = if *p > 1 {
            format!("{of_ring:.3}")
        } else {
            String::from("-")
        };
        println!(
            "  {p:>9} {:>12} {:>12} {shown:>14} {:>18}",
            m.sent,
            m.received,
            format!("{:016x}", m.state)
        );
        if *p > 1 && of_ring > MAX_OF_RING {
            failures.push(format!(
                "{p} processes move {of_ring:.3} times a ring's bytes"
            ));
        }
        if m.state != runs[0].1.state {
            failures.push(format!("{p} processes end in another state"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// A link's bandwidth in bytes per second and the latency of one message.
struct Link {
    name: &'static str,
    bytes_per_second: f64,
    latency: f64,
}

const LINKS: [Link; 2] = [
    Link {
        name: "10 Gbit/s, 20 us",
        bytes_per_second: 10e9 / 8.0,
        latency: 20e-6,
    },
    Link {
        name: "100 Gbit/s, 3 us",
        bytes_per_second: 100e9 / 8.0,
        latency: 3e-6,
    },
];

/// The model: global batches of 1024 in 64 shards of 16 on P processes of one thread, one
/// per machine. A process computes its 64 / P shards and folds them into its subtree's sum
/// (`shard` each), sums the P subtrees' slices (`leaf` in all) and updates (`rest`); it sends
/// and receives 2 (P - 1) / P of the gradient plus its shards' outcomes, in 2 (P - 1)
/// messages of the all-to-all and the all-gather. Nothing is counted as overlapped: an upper
/// bound, as the all-to-all's buckets leave during the last shard's backward pass.
fn model(c: &Compute) {
    const MODEL_SHARDS: usize = 64;
    println!(
        "\nModel: global batches of 1024 in {MODEL_SHARDS} shards of 16, one process of one \
         thread per machine, from the times above"
    );
    print!("  {:>9} {:>12}", "processes", "compute ms");
    for link in &LINKS {
        print!(" {:>26}", format!("{}: ms, speed-up", link.name));
    }
    println!();
    let gradient = (Mnist::TRAINABLE * 4) as f64;
    let compute = |p: usize| {
        let own = (MODEL_SHARDS / p) as f64;
        own * c.shard + if p > 1 { c.leaf } else { 0.0 } + c.rest
    };
    let one = compute(1);
    for p in [1usize, 2, 4, 8, 16, 32, 64] {
        print!("  {p:>9} {:>12.3}", compute(p) * 1e3);
        for link in &LINKS {
            let others = (p - 1) as f64;
            let outcomes = 40.0 * (MODEL_SHARDS / p) as f64 * others;
            let bytes = 2.0 * others / p as f64 * gradient + outcomes;
            let step = compute(p) + bytes / link.bytes_per_second + 2.0 * others * link.latency;
            print!(" {:>26}", format!("{:.3}, {:.1}x", step * 1e3, one / step));
        }
        println!();
    }
}

fn main() -> std::process::ExitCode {
    #[cfg(feature = "mpi")]
    if under_mpirun() {
        return as_rank();
    }
    assert!(
        !under_mpirun(),
        "build with --features mpi to run under mpirun"
    );
    let checked = report(&measured_runs());
    model(&compute_times(16, 64));
    match checked {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
