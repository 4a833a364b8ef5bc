//! Data-parallel training of the digits MLP, the same bits on any number of processes.
//!
//! ```text
//! cargo run --release --example data_parallel                    # one process, accumulating
//! cargo build --release --features mpi --example data_parallel
//! mpirun -np 4 target/release/examples/data_parallel             # four processes (as root:
//!                                                                # --allow-run-as-root)
//! ```
//!
//! Each global batch of 64 images is cut into 8 shards of 8 in the order of one seeded
//! permutation; each process computes the gradients of its shards and sums them, the
//! processes sum their sums in the order of the shards' tree, and every process runs the same
//! fused Adam update. The model has dropout, whose masks are keyed by each image's place in the
//! global batch. The last line, `state <hex>`, is a hash of the bits of the parameters, Adam's
//! slots and the step counter: it is the same for a run without MPI and for 1, 2, 4 and 8
//! processes (every process prints it).
//!
//! Options: `--epochs N` (3), `--shards N` (8), `--batch N` (8 per shard, at most 32),
//! `--threads N` per process (1), `--save PATH` (a checkpoint after the fit, written by rank
//! 0), `--resume PATH` (start from such a checkpoint: the run ends with the state of one that
//! never stopped), `--fail-rank R` (rank `R` fails at the end of the first epoch: the job ends
//! with an error on every process instead of hanging), `--panic-rank R` (rank `R` panics
//! there instead), `--data PATH` (the CSV to train on:
//! the shipped digits by default), `--seed N` (the fit's seed, 1). Processes that were given
//! different data or options stop before the first step, with a message naming what differs;
//! one that fails anywhere (its data file missing, say) ends the job with its message.

#[path = "support/state.rs"]
mod state;

use fusegraph::data::{Csv, Standardize};
use fusegraph::distributed::Communicator;
use fusegraph::fit::{Control, EpochLog, FitState, Hook, TrainError};
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use state::state_hash;
use std::error::Error;
use std::process::ExitCode;

/// 8x8 images in, ten class logits out, with dropout between the layers.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Digits {
    hidden: Dense<64, 128, Relu>,
    drop: Dropout<128, 100>,
    out: Dense<128, 10>,
}

const BATCH: usize = 32;

/// The command line.
struct Options {
    epochs: usize,
    shards: usize,
    batch: usize,
    threads: usize,
    save: Option<String>,
    resume: Option<String>,
    fail_rank: Option<usize>,
    panic_rank: Option<usize>,
    data: String,
    seed: u64,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let mut o = Options {
        epochs: 3,
        shards: 8,
        batch: 8,
        threads: 1,
        save: None,
        resume: None,
        fail_rank: None,
        panic_rank: None,
        data: concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv").to_string(),
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--epochs" => o.epochs = number()?,
            "--shards" => o.shards = number()?,
            "--batch" => o.batch = number()?,
            "--threads" => o.threads = number()?,
            "--fail-rank" => o.fail_rank = Some(number()?),
            "--panic-rank" => o.panic_rank = Some(number()?),
            "--seed" => o.seed = number()? as u64,
            "--data" => o.data = value,
            "--save" => o.save = Some(value),
            "--resume" => o.resume = Some(value),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    Ok(o)
}

/// With the feature `mpi`, this process's part of the job `mpirun` started: an error on any
/// process ends every one of them, with its message.
#[cfg(feature = "mpi")]
fn main() -> ExitCode {
    let mpi = match fusegraph::distributed::Mpi::init() {
        Ok(mpi) => mpi,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = train(mpi.world());
    mpi.finish(outcome)
}

/// Without the feature `mpi`, this process alone, accumulating the shards' gradients.
#[cfg(not(feature = "mpi"))]
fn main() -> ExitCode {
    match train(fusegraph::distributed::Solo) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn train(comm: impl Communicator + Send + 'static) -> Result<(), Box<dyn Error>> {
    let o = options()?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let mut data = Csv::new()
        .label_column("label")
        .classes(10)
        .read_classes(&o.data)?;
    Standardize::fit(&data).apply(&mut data);

    let model = Digits::init(Seed(7));
    let step = TrainStep::<Digits, Adam, BATCH>::new(&model, Adam::default().with_lr(0.001))
        .with_seed(Seed(3));
    let mut trainer = Trainer::new(model, step)
        .metrics(&[Metric::Accuracy])
        .verbose(Verbose::Silent)
        .threads(o.threads)
        .data_parallel(comm, o.shards)?;
    let initial_epoch = match &o.resume {
        Some(path) => trainer.resume(path)?,
        None => 0,
    };
    if rank == 0 {
        println!(
            "{} images, {ranks} process(es) x {} thread(s); global batches of {} shards x {} \
             images, epochs {}..={}",
            data.len(),
            o.threads,
            o.shards,
            o.batch,
            initial_epoch + 1,
            o.epochs
        );
    }
    let (fail_rank, panic_rank) = (o.fail_rank, o.panic_rank);
    let mut fail = Hook::new(
        move |_: &EpochLog, state: FitState<'_, Digits, Adam, BATCH>| {
            if panic_rank == Some(state.rank) {
                panic!("rank {} panics on purpose (--panic-rank)", state.rank);
            }
            match fail_rank {
                Some(r) if r == state.rank => Err(TrainError::Config(format!(
                    "rank {r} fails on purpose (--fail-rank)"
                ))),
                _ => Ok(Control::Continue),
            }
        },
    );
    let options = FitOptions::new(o.epochs)
        .batch_size(o.batch)
        .initial_epoch(initial_epoch)
        .seed(Seed(o.seed));
    let history = trainer.fit(&data, &options, &mut [&mut fail])?;
    if let Some(path) = &o.save {
        trainer.save_checkpoint(path, o.epochs)?;
    }
    if let (0, Some(last)) = (rank, history.epochs.last()) {
        println!(
            "epoch {}: loss {:.6}, accuracy {:.4}, {} steps",
            last.epoch,
            last.train.loss,
            last.train.accuracy.unwrap_or(f32::NAN),
            last.steps
        );
    }
    let (model, step) = trainer.into_parts();
    println!("state {:016x}", state_hash(&model, &step));
    Ok(())
}
