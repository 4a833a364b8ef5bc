//! Data-parallel training of the MLP 784-128(ReLU)-10 (softmax cross-entropy, Adam) in global
//! batches of 256 and 1024 cut into 2 shards: samples per second for 1 process x 1 thread and
//! 1 process x 2 threads (interleaved, in this process), then, with the feature `mpi`, for 2
//! processes x 1 thread (this program again, under `mpirun -np 2`); the bytes each process
//! sends per step and the share of the step spent in the gather (waiting on the other process
//! included). All of them compute the same bits.
//!
//! ```text
//! cargo run --release --features mpi --example bench_data_parallel
//! ```

#[path = "support/timing.rs"]
mod timing;

use fusegraph::distributed::{Communicator, DataParallel, Shards, Solo};
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use std::cell::Cell;
use std::time::Instant;
use timing::{measure, stats, value, Variant};

/// The most samples of a shard: half of the largest global batch.
const B: usize = 512;
const SHARDS: usize = 2;
const GLOBALS: [usize; 2] = [256, 1024];
/// Synthetic samples the steps cycle through.
const SAMPLES: usize = 4096;

/// The MLP of the benchmark suite (`bench_train`).
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Mnist {
    fc1: Dense<784, 128, Relu>,
    fc2: Dense<128, 10>,
}

/// A communicator that adds up the seconds spent in its gathers.
struct Timed<C> {
    inner: C,
    waited: Cell<f64>,
}

impl<C: Communicator> Communicator for Timed<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        let t = Instant::now();
        self.inner.all_gather(mine, all);
        self.waited
            .set(self.waited.get() + t.elapsed().as_secs_f64());
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

/// One configuration's model, step and data-parallel step at one global batch.
struct Run<C: Communicator> {
    model: Mnist,
    step: TrainStep<Mnist, Adam, B>,
    dp: DataParallel<Mnist, Adam, B, Timed<C>>,
    global: usize,
    next: usize,
}

impl<C: Communicator> Run<C> {
    fn new(comm: C, global: usize) -> Self {
        let model = Mnist::init(Seed(1));
        let step = TrainStep::new(&model, Adam::default());
        let timed = Timed {
            inner: comm,
            waited: Cell::new(0.0),
        };
        let dp = DataParallel::new(timed, Shards::new(SHARDS, global / SHARDS)).expect("shards");
        Run {
            model,
            step,
            dp,
            global,
            next: 0,
        }
    }

    /// One step on the next global batch of the synthetic data.
    fn step(&mut self, x: &[f32], y: &[u32]) {
        let at = self.next * self.global % SAMPLES;
        let (xs, ys) = (
            &x[at * 784..(at + self.global) * 784],
            &y[at..at + self.global],
        );
        self.dp.run(&mut self.model, &mut self.step, xs, ys);
        self.next += 1;
    }
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool")
}

fn data() -> (Vec<f32>, Vec<u32>) {
    let x = (0..SAMPLES * 784).map(value).collect();
    let y = (0..SAMPLES).map(|i| (i * 7 % 10) as u32).collect();
    (x, y)
}

/// A table row; `sent` is the bytes a process sends per step and the share of the time spent
/// in the gather, for a job of several processes.
fn print_row(name: &str, global: usize, seconds: f64, sent: Option<(usize, f64)>) {
    let (bytes, waited) = sent.map_or((String::from("-"), String::from("-")), |(b, w)| {
        (b.to_string(), format!("{:.1}%", 100.0 * w))
    });
    println!(
        "  {name:<24} {global:>6} {:>12.0} {:>10.2} {bytes:>12} {waited:>10}",
        global as f64 / seconds,
        seconds * 1e3,
    );
}

fn header() {
    println!(
        "  {:<24} {:>6} {:>12} {:>10} {:>12} {:>10}",
        "processes x threads", "global", "samples/s", "ms/step", "bytes sent", "in gather"
    );
}

/// 1 process x 1 and 2 threads, interleaved.
fn one_process() {
    let (x, y) = data();
    let pools = [pool(1), pool(2)];
    let mut runs: Vec<(usize, Run<Solo>)> = Vec::new();
    for threads in [1, 2] {
        for global in GLOBALS {
            runs.push((threads, Run::new(Solo, global)));
        }
    }
    let globals: Vec<usize> = runs.iter().map(|(_, run)| run.global).collect();
    let mut variants: Vec<Variant<'_>> = runs
        .iter_mut()
        .map(|(threads, run)| {
            let (pool, x, y) = (&pools[*threads - 1], &x, &y);
            let name = format!("1 x {threads}");
            Variant::new(name, move || pool.install(|| run.step(x, y)))
        })
        .collect();
    measure(&mut variants, 4);
    println!("\nMLP 784-128-10, Adam, {SHARDS} shards a global batch; medians of one run");
    header();
    for (v, global) in variants.iter().zip(globals) {
        print_row(&v.name, global, stats(v).0, None);
    }
}

/// This process as one rank of an MPI job, one thread: rank 0 prints.
#[cfg(feature = "mpi")]
fn as_rank() {
    let world = fusegraph::distributed::Mpi::init().expect("MPI");
    let (x, y) = data();
    // One thread, the main one: MPI's calls stay on the thread that initialized it.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("the global pool");
    let ranks = world.size();
    for global in GLOBALS {
        let mut run = Run::new(&world, global);
        let mut v = [Variant::new(format!("{ranks} x 1"), || run.step(&x, &y))];
        let start = Instant::now();
        measure(&mut v, 4);
        let total = start.elapsed().as_secs_f64();
        let (median, name) = (stats(&v[0]).0, v[0].name.clone());
        drop(v);
        if world.rank() == 0 {
            let waited = run.dp.communicator().waited.get() / total;
            let sent = run.dp.bytes_sent_per_step();
            print_row(&name, global, median, Some((sent, waited)));
        }
    }
}

/// Runs this program under `mpirun -np 2` and relays its table.
#[cfg(feature = "mpi")]
fn two_processes() {
    let exe = std::env::current_exe().expect("this program's path");
    let out = std::process::Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", "2"])
        .arg(exe)
        .output()
        .expect("mpirun");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `mpirun` started this process (OpenMPI or MPICH).
fn under_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

fn main() {
    #[cfg(feature = "mpi")]
    if under_mpirun() {
        as_rank();
        return;
    }
    assert!(
        !under_mpirun(),
        "build with --features mpi to run under mpirun"
    );
    one_process();
    #[cfg(feature = "mpi")]
    two_processes();
    #[cfg(not(feature = "mpi"))]
    println!("(2 processes x 1 thread: build with --features mpi)");
}
