//! Checkpoints: PyTorch names and layouts in the file, exact resume (Adam with a schedule,
//! BatchNorm and Dropout with SGD-momentum, Nadam's carried scalar with an EMA), one typed
//! error per kind of bad file with nothing changed, atomic writes under injected failures and
//! under `kill`, and random corruption that never panics. Integrity: every single flipped bit
//! is an error or changes nothing, each layer kind is part of the model's identity, files of
//! format version 1 load with warnings, NaNs are refused unless accepted, and saves report the
//! caller's path and clean up after killed writers. `torch_import`: loading a PyTorch
//! `state_dict`.

mod common;
#[path = "checkpoint/torch_import.rs"]
mod torch_import;

use common::{bits, Rng};
use fusegraph::checkpoint::{self, CheckpointError, Loader, Warning};
use fusegraph::fs::{self as atomic, Fault};
use fusegraph::optim::{keras, torch, Ema, Fused, Schedule, Storage, UpdateMode};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, Step};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The smallest layout test: one Dense.
#[fusegraph::model(loss = Mse)]
pub struct Tiny {
    fc: Dense<3, 2>,
}

/// An MLP.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Mlp {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

/// Running statistics, seeded dropout masks and a LayerNorm.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Normed {
    fc1: Dense<8, 16, Relu>,
    bn: BatchNorm<16>,
    drop: Dropout<16, 300>,
    ln: LayerNorm<16>,
    head: Dense<16, 4>,
}

/// A convolution (OIHW in the file) with a BatchNorm2d over its channels.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Conv {
    conv: Conv2d<5, 5, 2, 3, 3, 3, 1, Valid, Relu>,
    bn: BatchNorm<3, 9>,
    flat: Flatten<27>,
    fc: Dense<27, 4>,
}

/// A sequence model: a Conv1d (`[out, in, k]` in the file) and a Dense at every position.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Seq {
    conv: Conv1d<6, 2, 3, 3, 1, Same, Relu>,
    proj: PerPosition<Dense<3, 4>, 6>,
    pool: MeanOverTime<6, 4>,
}

/// Large enough that a save takes a while (three 1 MiB tensors), for the kill test.
#[fusegraph::model(loss = Mse)]
pub struct Big {
    fc: Dense<512, 512, Identity, false>,
}

/// A fresh directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!(
        "fusegraph-checkpoint-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// The names of the files in `dir`.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A safetensors file taken apart: its header (JSON) and data section.
struct Parsed {
    header: Map<String, Value>,
    data: Vec<u8>,
}

impl Parsed {
    fn new(bytes: &[u8]) -> Self {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        Parsed {
            header,
            data: bytes[8 + n..].to_vec(),
        }
    }

    /// The file, its checksums recomputed after an edit (when it has them), so that a load
    /// judges what the edit changed.
    fn bytes(&self) -> Vec<u8> {
        let mut sealed = Parsed {
            header: self.header.clone(),
            data: self.data.clone(),
        };
        sealed.reseal();
        sealed.unsealed_bytes()
    }

    /// The file as it is, checksums included.
    fn unsealed_bytes(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec(&self.header).unwrap();
        json.resize(json.len().next_multiple_of(8), b' ');
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend(json);
        out.extend(&self.data);
        out
    }

    /// Recomputes the checksum of every tensor and of the metadata, as `save` computes them,
    /// when the metadata has a checksum.
    fn reseal(&mut self) {
        let Some(Value::Object(meta)) = self.header.get("__metadata__") else {
            return;
        };
        if !meta.contains_key("metadata_checksum") {
            return;
        }
        let sums: Vec<(String, String)> = self
            .names()
            .into_iter()
            .filter_map(|n| Some((format!("checksum.{n}"), crc32(self.stored(n)?))))
            .collect();
        let meta = self.header["__metadata__"].as_object_mut().unwrap();
        for (key, sum) in sums {
            meta.insert(key, sum.into());
        }
        let mut h = crc32fast::Hasher::new();
        for (k, v) in meta.iter().filter(|(k, _)| *k != "metadata_checksum") {
            for s in [k.as_str(), v.as_str().unwrap()] {
                h.update(&(s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
        }
        meta.insert(
            "metadata_checksum".into(),
            format!("{:08x}", h.finalize()).into(),
        );
    }

    fn info(&self, name: &str) -> &Map<String, Value> {
        self.header[name].as_object().unwrap()
    }

    fn shape(&self, name: &str) -> Vec<usize> {
        let shape = self.info(name)["shape"].as_array().unwrap();
        shape.iter().map(|d| d.as_u64().unwrap() as usize).collect()
    }

    fn raw(&self, name: &str) -> &[u8] {
        self.stored(name).unwrap()
    }

    /// The bytes of tensor `name`, if its offsets are inside the data.
    fn stored(&self, name: &str) -> Option<&[u8]> {
        let off = self.info(name)["data_offsets"].as_array()?;
        let (s, e) = (off[0].as_u64()?, off[1].as_u64()?);
        self.data
            .get(usize::try_from(s).ok()?..usize::try_from(e).ok()?)
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        assert_eq!(self.info(name)["dtype"], "F32", "{name}");
        let raw = self.raw(name).chunks_exact(4);
        raw.map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    fn i64(&self, name: &str) -> i64 {
        assert_eq!(self.info(name)["dtype"], "I64", "{name}");
        i64::from_le_bytes(self.raw(name).try_into().unwrap())
    }

    fn meta(&self, key: &str) -> Option<&str> {
        self.header["__metadata__"][key].as_str()
    }

    fn names(&self) -> Vec<&str> {
        let mut n: Vec<&str> = self.header.keys().map(String::as_str).collect();
        n.retain(|k| *k != "__metadata__");
        n.sort();
        n
    }
}

/// The CRC-32 of `bytes` as a checkpoint writes it: zlib's, as 8 lowercase hex digits.
fn crc32(bytes: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(bytes))
}

/// Classification data: `n` samples of `inputs` features, targets in `0..4`.
fn batch(seed: u64, n: usize, inputs: usize) -> (Vec<f32>, Vec<u32>) {
    let mut rng = Rng::new(seed);
    let x = rng.vec(n * inputs, 1.0);
    let y = (0..n).map(|i| (i % 4) as u32).collect();
    (x, y)
}

/// Everything a train step and model hold, bit for bit: parameters, state, every slot, the
/// EMA, carried scalars, the step counter and seed, the hyper-parameters.
fn snapshot<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    m: &M,
    s: &Step<M, R, B, U, S>,
) -> Vec<Vec<u32>> {
    let opt = s.optimizer();
    let mut out = vec![bits(m.params()), bits(m.state())];
    out.extend(R::SLOTS.iter().map(|n| bits(opt.slot(n).unwrap())));
    out.push(bits(opt.ema().unwrap_or_default()));
    let carried: Vec<f32> = R::CARRIED.iter().map(|c| opt.carried(c).unwrap()).collect();
    out.push(bits(&carried));
    let hyper: Vec<f32> = R::HYPER
        .iter()
        .map(|h| opt.rule().hyper(h).unwrap())
        .collect();
    out.push(bits(&hyper));
    out.push(vec![opt.iterations() as u32, s.seed().0 as u32]);
    out
}

/// Trains `n + m` steps without a stop, and `n` steps, a save, a load into a fresh model and
/// train step (other initial weights, seed and hyper-parameters), `m` more steps: the two end
/// bit for bit the same, in memory and through a file.
fn resume_is_exact<M: Model<Loss = SoftmaxCrossEntropy, Input = f32>, R: Rule, const B: usize>(
    name: &str,
    init: impl Fn(u64) -> M,
    step: impl Fn(&M, bool) -> TrainStep<M, R, B>,
    (n, m): (usize, usize),
) {
    let batches: Vec<(Vec<f32>, Vec<u32>)> = (0..n + m)
        .map(|i| batch(100 + i as u64, B, M::IN))
        .collect();
    let mut model = init(1);
    let mut train = step(&model, true);
    for (x, y) in &batches {
        train.run(&mut model, x, y);
    }
    let straight = snapshot(&model, &train);

    let mut model = init(1);
    let mut train = step(&model, true);
    for (x, y) in &batches[..n] {
        train.run(&mut model, x, y);
    }
    let dir = scratch(name);
    let path = dir.join("run.safetensors");
    checkpoint::save_with(&path, &model, &train, &[("epoch", "2")]).unwrap();
    let bytes = checkpoint::to_bytes_with(&model, &train, &[("epoch", "2")]).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file is to_bytes");

    let mut model = init(2);
    let mut train = step(&model, false);
    let meta = checkpoint::load(&path, &mut model, &mut train).unwrap();
    assert_eq!(meta.get("epoch"), Some("2"));
    assert_eq!(train.optimizer().iterations(), n as u64);
    for (x, y) in &batches[n..] {
        train.run(&mut model, x, y);
    }
    assert_eq!(
        snapshot(&model, &train),
        straight,
        "{name}: resumed run differs"
    );
}

#[test]
fn resume_adam_with_a_cosine_schedule_is_exact() {
    resume_is_exact::<Mlp, keras::Adam, 8>(
        "adam",
        |s| Mlp::init(Seed(s)),
        |m, first| {
            let lr = if first { 0.01 } else { 0.5 };
            let config = Config::default().schedule(Schedule::cosine(0.01, 12, 0.1));
            TrainStep::with_config(m, keras::Adam::default().with_lr(lr), config)
                .with_seed(Seed(if first { 3 } else { 4 }))
        },
        (5, 6),
    );
}

#[test]
fn resume_torch_adam_with_batchnorm_and_dropout_is_exact() {
    resume_is_exact::<Normed, torch::Adam, 8>(
        "torch-adam",
        |s| Normed::init(Seed(s)),
        |m, first| {
            let beta2 = if first { 0.99 } else { 0.9 };
            TrainStep::new(m, torch::Adam::default().with_beta2(beta2)).with_seed(Seed(if first {
                11
            } else {
                12
            }))
        },
        (4, 5),
    );
}

#[test]
fn resume_sgd_momentum_with_batchnorm_and_dropout_is_exact() {
    resume_is_exact::<Normed, keras::SgdMomentum, 8>(
        "sgd-momentum",
        |s| Normed::init(Seed(s)),
        |m, first| {
            let momentum = if first { 0.9 } else { 0.5 };
            TrainStep::new(m, keras::SgdMomentum::default().with_momentum(momentum))
                .with_seed(Seed(if first { 21 } else { 22 }))
        },
        (3, 4),
    );
}

#[test]
fn resume_nadam_with_carried_scalar_and_ema_is_exact() {
    resume_is_exact::<Conv, keras::Nadam, 4>(
        "nadam-ema",
        |s| Conv::init(Seed(s)),
        |m, _| {
            let config = Config::default().ema(Ema {
                momentum: 0.9,
                overwrite_every: 0,
            });
            TrainStep::with_config(m, keras::Nadam::default(), config)
        },
        (3, 3),
    );
}

/// A tensor-wise rule's state resumes bit for bit: Adafactor's row and column statistics of
/// each matrix (stored in their own shapes) and the whole second moment of each vector, and
/// the file names each statistic under its tensor.
#[test]
fn resume_adafactor_with_row_and_column_statistics_is_exact() {
    resume_is_exact::<Mlp, keras::Adafactor, 8>(
        "adafactor",
        |s| Mlp::init(Seed(s)),
        |m, first| {
            let lr = if first { 0.05 } else { 0.5 };
            TrainStep::new(m, keras::Adafactor::default().with_lr(lr))
        },
        (3, 4),
    );
    let model = Mlp::init(Seed(1));
    let train: TrainStep<Mlp, keras::Adafactor, 8> =
        TrainStep::new(&model, keras::Adafactor::default());
    let file = Parsed::new(&checkpoint::to_bytes(&model, &train).unwrap());
    assert_eq!(file.shape("optimizer.r.fc1.weight"), [8]);
    assert_eq!(file.shape("optimizer.c.fc1.weight"), [16]);
    assert_eq!(file.shape("optimizer.velocity.fc2.bias"), [4]);
    let names = file.names();
    assert!(
        !names.contains(&"optimizer.r.fc2.bias"),
        "a vector keeps no row statistic"
    );
}

/// Muon's matrices and the tensors routed by name to its AdamW branch resume bit for bit; a
/// checkpoint of one routing does not load into a step routed otherwise.
#[test]
fn resume_muon_with_a_routed_layer_is_exact() {
    let routed = |m: &Mlp| {
        TrainStep::with_routes(
            m,
            keras::Muon::default(),
            Config::default(),
            &[("fc2", "adamw")],
        )
        .unwrap()
    };
    resume_is_exact::<Mlp, keras::Muon, 8>(
        "muon",
        |s| Mlp::init(Seed(s)),
        |m, _| routed(m),
        (3, 3),
    );
    let model = Mlp::init(Seed(1));
    let bytes = checkpoint::to_bytes(&model, &routed(&model)).unwrap();
    let file = Parsed::new(&bytes);
    let names = file.names();
    assert!(
        names.contains(&"optimizer.velocity.fc2.weight"),
        "routed to AdamW"
    );
    assert!(
        !names.contains(&"optimizer.velocity.fc1.weight"),
        "Muon's matrix"
    );
    let mut other: TrainStep<Mlp, keras::Muon, 8> = TrainStep::new(&model, keras::Muon::default());
    let mut into = Mlp::init(Seed(2));
    assert!(checkpoint::from_bytes(&bytes, &mut into, &mut other).is_err());
}

/// Every kind of train step keeps the same state in the same layout: a checkpoint of a
/// layer-wise `EmbeddedStep` resumes in a layer-wise `TrainStep`, whose checkpoint resumes in a
/// `TrainStep` that updates after the whole backward pass, and the three legs end with the bits
/// of one `TrainStep` run that never stopped (BatchNorm statistics, dropout masks, Adam's slots,
/// per-tensor clipping and the schedule included).
#[test]
fn checkpoints_move_between_the_kinds_of_step() {
    let rule = keras::Adam::default().with_lr(0.02);
    fn config<U: UpdateMode>() -> Config<U> {
        Config::new()
            .clip_tensor_norm(0.5)
            .schedule(Schedule::cosine(0.02, 12, 0.1))
    }
    let batches: Vec<(Vec<f32>, Vec<u32>)> = (0..10).map(|i| batch(300 + i, 8, 8)).collect();
    let mut model = Normed::init(Seed(1));
    let mut straight =
        TrainStep::<Normed, _, 8>::with_config(&model, rule, config()).with_seed(Seed(9));
    for (x, y) in &batches {
        straight.run(&mut model, x, y);
    }
    let expected = snapshot(&model, &straight);

    let mut model = Normed::init(Seed(1));
    let mut arena = vec![f32::NAN; EmbeddedStep::<Normed, keras::Adam, 8>::FLOATS];
    let mut embedded =
        EmbeddedStep::<Normed, _, 8>::with_config(&model, rule, config(), &mut arena)
            .unwrap()
            .with_seed(Seed(9));
    for (x, y) in &batches[..4] {
        embedded.run(&mut model, x, y);
    }
    let file = checkpoint::to_bytes(&model, &embedded).unwrap();

    let mut model = Normed::init(Seed(2));
    let mut layerwise =
        TrainStep::<Normed, _, 8, Fused>::with_config(&model, keras::Adam::default(), config());
    checkpoint::from_bytes(&file, &mut model, &mut layerwise).unwrap();
    for (x, y) in &batches[4..7] {
        layerwise.run(&mut model, x, y);
    }
    let file = checkpoint::to_bytes(&model, &layerwise).unwrap();

    let mut model = Normed::init(Seed(3));
    let mut full = TrainStep::<Normed, _, 8>::with_config(&model, keras::Adam::default(), config());
    checkpoint::from_bytes(&file, &mut model, &mut full).unwrap();
    for (x, y) in &batches[7..] {
        full.run(&mut model, x, y);
    }
    assert_eq!(snapshot(&model, &full), expected);
}

#[test]
fn dense_weight_is_saved_transposed_as_pytorch_stores_it() {
    let model = Tiny::init(Seed(5));
    let step = TrainStep::<Tiny, keras::Adam, 2>::new(&model, keras::Adam::default().with_lr(0.25));
    let f = Parsed::new(&checkpoint::to_bytes(&model, &step).unwrap());
    let w = model.fc().weight(); // [in = 3, out = 2]
    assert_eq!(f.shape("fc.weight"), [2, 3]);
    let transposed: Vec<f32> = (0..2)
        .flat_map(|o| (0..3).map(move |i| w[i * 2 + o]))
        .collect();
    assert_eq!(bits(&f.f32s("fc.weight")), bits(&transposed));
    assert_eq!(bits(&f.f32s("fc.bias")), bits(model.fc().bias()));
    assert_eq!(f.shape("optimizer.momentum.fc.weight"), [2, 3]);
    assert_eq!(f.shape("train.step"), Vec::<usize>::new());
    assert_eq!(f.i64("train.step"), 0);
    assert_eq!(f.i64("train.seed") as u64, step.seed().0);
    assert_eq!(
        f.names(),
        [
            "fc.bias",
            "fc.weight",
            "optimizer.momentum.fc.bias",
            "optimizer.momentum.fc.weight",
            "optimizer.velocity.fc.bias",
            "optimizer.velocity.fc.weight",
            "train.seed",
            "train.step",
        ]
    );
    assert_eq!(f.meta("format"), Some("fusegraph"));
    assert_eq!(f.meta("format_version"), Some("2"));
    assert_eq!(f.meta("contents"), Some("training"));
    assert_eq!(f.meta("optimizer"), Some("Adam"));
    assert_eq!(f.meta("optimizer.slots"), Some("momentum,velocity"));
    assert_eq!(f.meta("optimizer.hyper.lr"), Some("0.25"));
    assert_eq!(f.meta("optimizer.hyper.beta_1"), Some("0.9"));
    assert_eq!(f.meta("optimizer.hyper.beta_2"), Some("0.999"));
    assert_eq!(f.meta("optimizer.hyper.epsilon"), Some("0.0000001"));
    assert_eq!(f.meta("optimizer.schedule"), Some("none"));
    assert!(f.meta("optimizer.config").unwrap().starts_with("Config {"));
    let sig = f.meta("model_signature").unwrap();
    assert_eq!(sig, checkpoint::signature::<Tiny>());
    let weight = f.meta("checksum.fc.weight");
    assert_eq!(weight, Some(crc32(f.raw("fc.weight")).as_str()));
    assert_eq!(
        f.meta("model_layers"),
        Some(
            "fc: Dense<3, 2, linear, bias: true>
loss: Mse"
        )
    );
    assert!(sig.len() == 16 && sig.bytes().all(|b| b.is_ascii_hexdigit()));
}

#[test]
fn conv1d_weight_is_out_in_k_and_a_per_position_dense_is_pytorch_s_linear() {
    let model = Seq::init(Seed(8));
    let f = Parsed::new(&checkpoint::model_to_bytes(&model).unwrap());
    let w = model.conv().weight(); // [K = 3, C_IN = 2, C_OUT = 3]
    assert_eq!(f.shape("conv.weight"), [3, 2, 3]);
    let out_in_k: Vec<f32> = (0..3)
        .flat_map(|o| (0..2).flat_map(move |c| (0..3).map(move |j| w[(j * 2 + c) * 3 + o])))
        .collect();
    assert_eq!(bits(&f.f32s("conv.weight")), bits(&out_in_k));
    let p = model.proj().weight(); // [in = 3, out = 4]
    assert_eq!(f.shape("proj.weight"), [4, 3]);
    let transposed: Vec<f32> = (0..4)
        .flat_map(|o| (0..3).map(move |i| p[i * 4 + o]))
        .collect();
    assert_eq!(bits(&f.f32s("proj.weight")), bits(&transposed));
    assert_eq!(
        f.names(),
        ["conv.bias", "conv.weight", "proj.bias", "proj.weight"]
    );
}

/// Token ids through an embedding and causal self-attention without a key bias.
#[fusegraph::model(loss = SequenceCrossEntropy<5>, input = u32)]
struct Attn {
    tok: Embedding<5, 4, 3>,
    attn: CausalSelfAttention<3, 4, 2, true, false>,
    head: PerPosition<Dense<4, 5>, 3>,
}

#[test]
fn attention_projections_save_as_pytorch_linears_and_embeddings_as_they_are() {
    let model = Attn::init(Seed(3));
    let f = Parsed::new(&checkpoint::model_to_bytes(&model).unwrap());
    let w = model.attn().tensor("o_weight").unwrap(); // [in = 4, out = 4]
    assert_eq!(f.shape("attn.o.weight"), [4, 4]);
    let transposed: Vec<f32> = (0..4)
        .flat_map(|o| (0..4).map(move |i| w[i * 4 + o]))
        .collect();
    assert_eq!(bits(&f.f32s("attn.o.weight")), bits(&transposed));
    assert_eq!(f.shape("tok.weight"), [5, 4]);
    assert_eq!(bits(&f.f32s("tok.weight")), bits(model.tok().weight()));
    assert_eq!(
        f.names(),
        [
            "attn.k.weight",
            "attn.o.bias",
            "attn.o.weight",
            "attn.q.bias",
            "attn.q.weight",
            "attn.v.bias",
            "attn.v.weight",
            "head.bias",
            "head.weight",
            "tok.weight"
        ]
    );
    let mut back = Attn::init(Seed(4));
    checkpoint::model_from_bytes(&checkpoint::model_to_bytes(&model).unwrap(), &mut back).unwrap();
    assert_eq!(bits(back.params()), bits(model.params()));
}

#[test]
fn conv_weight_is_oihw_and_batchnorm_has_pytorch_state() {
    let mut model = Conv::init(Seed(6));
    let mut step = TrainStep::<Conv, torch::SgdMomentum, 4>::new(&model, Default::default());
    let (x, y) = batch(1, 4, Conv::IN);
    step.run(&mut model, &x, &y);
    step.run(&mut model, &x, &y);
    let config = Config::default().schedule(Schedule::step(0.1, 10, 0.5));
    let scheduled =
        TrainStep::<Conv, torch::SgdMomentum, 4>::with_config(&model, Default::default(), config);
    let f = Parsed::new(&checkpoint::to_bytes(&model, &step).unwrap());
    let w = model.conv().weight(); // [KH = 3, KW = 3, C = 2, F = 3]
    assert_eq!(f.shape("conv.weight"), [3, 2, 3, 3]);
    let saved = f.f32s("conv.weight");
    let mut i = 0;
    for o in 0..3 {
        for c in 0..2 {
            for h in 0..3 {
                for x in 0..3 {
                    assert_eq!(
                        saved[i].to_bits(),
                        w[((h * 3 + x) * 2 + c) * 3 + o].to_bits()
                    );
                    i += 1;
                }
            }
        }
    }
    let bn = model.bn();
    assert_eq!(
        bits(&f.f32s("bn.weight")),
        bits(bn.tensor("gamma").unwrap())
    );
    assert_eq!(bits(&f.f32s("bn.bias")), bits(bn.tensor("beta").unwrap()));
    assert_eq!(bits(&f.f32s("bn.running_mean")), bits(&model.state()[..3]));
    assert_eq!(bits(&f.f32s("bn.running_var")), bits(&model.state()[3..]));
    assert!(
        model.state()[..3].iter().any(|&m| m != 0.0),
        "statistics moved"
    );
    assert_eq!(f.i64("bn.num_batches_tracked"), 2);
    assert_eq!(
        f.shape("optimizer.momentum_buffer.conv.weight"),
        [3, 2, 3, 3]
    );
    let meta = Parsed::new(&checkpoint::to_bytes(&model, &scheduled).unwrap());
    assert!(meta
        .meta("optimizer.schedule")
        .unwrap()
        .contains("staircase: true"));
    assert!(meta
        .meta("optimizer.config")
        .unwrap()
        .contains("schedule: Some("));

    let only = Parsed::new(&checkpoint::model_to_bytes(&model).unwrap());
    assert_eq!(only.i64("bn.num_batches_tracked"), 0);
    assert_eq!(only.meta("contents"), Some("model"));
    assert_eq!(
        only.names(),
        [
            "bn.bias",
            "bn.num_batches_tracked",
            "bn.running_mean",
            "bn.running_var",
            "bn.weight",
            "conv.bias",
            "conv.weight",
            "fc.bias",
            "fc.weight",
        ]
    );
}

#[test]
fn model_files_load_for_inference_and_training_files_too() {
    let dir = scratch("model-only");
    let (model_file, train_file) = (dir.join("model.safetensors"), dir.join("run.safetensors"));
    let mut model = Normed::init(Seed(1));
    let mut step = TrainStep::<Normed, keras::Adam, 8>::new(&model, keras::Adam::default());
    let (x, y) = batch(3, 8, Normed::IN);
    step.run(&mut model, &x, &y);
    checkpoint::save_model(&model_file, &model).unwrap();
    checkpoint::save(&train_file, &model, &step).unwrap();
    for file in [&model_file, &train_file] {
        let mut other = Normed::init(Seed(2));
        let meta = checkpoint::load_model(file, &mut other).unwrap();
        assert_eq!(meta.get("format"), Some("fusegraph"));
        assert_eq!(bits(other.params()), bits(model.params()));
        assert_eq!(bits(other.state()), bits(model.state()));
    }
    let mut other = Normed::init(Seed(2));
    let mut fresh = TrainStep::<Normed, keras::Adam, 8>::new(&other, keras::Adam::default());
    let err = checkpoint::load(&model_file, &mut other, &mut fresh).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Metadata { key, found: Some(f), .. } if key == "contents" && f == "model"),
        "{err}"
    );
}

#[test]
fn metadata_and_signatures() {
    let model = Mlp::init(Seed(1));
    let step = TrainStep::<Mlp, keras::Adam, 4>::new(&model, keras::Adam::default());
    let note = "a \"quoted\" \\ line\n\u{1}\t\u{e9}";
    let extra = [("epoch", "7"), ("format", "mine"), ("note", note)];
    let bytes = checkpoint::to_bytes_with(&model, &step, &extra).unwrap();
    assert_eq!(
        bytes,
        checkpoint::to_bytes_with(&model, &step, &extra).unwrap()
    );
    let mut other = Mlp::init(Seed(2));
    let mut fresh = TrainStep::<Mlp, keras::Adam, 4>::new(&other, keras::Adam::default());
    let meta = checkpoint::from_bytes(&bytes, &mut other, &mut fresh).unwrap();
    assert_eq!(meta.get("epoch"), Some("7"));
    assert_eq!(meta.get("format"), Some("mine"), "the caller's entry first");
    assert_eq!(meta.get("format_version"), Some("2"));
    assert_eq!(meta.warnings(), []);
    assert_eq!(meta.get("optimizer.hyper.lr"), Some("0.001"));
    assert_eq!(meta.get("missing"), None);
    let extra: Vec<(&str, &str)> = meta.extra().collect();
    assert_eq!(extra, [("epoch", "7"), ("format", "mine"), ("note", note)]);

    let sig = checkpoint::signature::<Mlp>();
    assert_eq!(sig, checkpoint::signature::<Mlp>());
    let others = [
        checkpoint::signature::<Tiny>(),
        checkpoint::signature::<Normed>(),
        checkpoint::signature::<Conv>(),
        checkpoint::signature::<Big>(),
    ];
    for s in &others {
        assert_ne!(&sig, s);
    }
}

/// Every kind of bad file gives its error, with a message that names what is wrong, and
/// leaves the model and the train step as they were.
#[test]
fn bad_files_give_typed_errors_and_change_nothing() {
    let mut model = Mlp::init(Seed(1));
    let mut step = TrainStep::<Mlp, keras::Adam, 8>::new(&model, keras::Adam::default());
    let (x, y) = batch(9, 8, Mlp::IN);
    step.run(&mut model, &x, &y);
    let good = checkpoint::to_bytes(&model, &step).unwrap();

    let mut target = Mlp::init(Seed(2));
    let mut train = TrainStep::<Mlp, keras::Adam, 8>::new(&target, keras::Adam::default());
    let before = snapshot(&target, &train);
    let mut check = |bytes: &[u8], ok: &dyn Fn(&CheckpointError) -> bool, says: &str| {
        let err = checkpoint::from_bytes(bytes, &mut target, &mut train).unwrap_err();
        assert!(ok(&err), "unexpected error: {err:?}");
        assert!(
            err.to_string().contains(says),
            "`{err}` should say `{says}`"
        );
        assert_eq!(
            snapshot(&target, &train),
            before,
            "changed by a failed load"
        );
    };

    let edit = |f: &dyn Fn(&mut Parsed)| {
        let mut p = Parsed::new(&good);
        f(&mut p);
        p.bytes()
    };
    let renamed = edit(&|p| {
        let v = p.header.remove("fc2.bias").unwrap();
        p.header.insert("fc2.b".into(), v);
    });
    check(
        &renamed,
        &|e| matches!(e, CheckpointError::MissingTensor { name, shape } if name == "fc2.bias" && shape == &[4]),
        "`fc2.bias` (expected shape [4])",
    );
    let extra = edit(&|p| {
        let end = p.data.len();
        let info = serde_json::json!({"dtype": "F32", "shape": [0], "data_offsets": [end, end]});
        p.header.insert("fc3.weight".into(), info);
    });
    check(
        &extra,
        &|e| matches!(e, CheckpointError::UnexpectedTensor { name } if name == "fc3.weight"),
        "`fc3.weight`",
    );
    let reshaped = edit(&|p| {
        p.header["fc1.weight"]["shape"] = serde_json::json!([8, 16]);
    });
    check(
        &reshaped,
        &|e| matches!(e, CheckpointError::Shape { name, expected, found } if name == "fc1.weight" && expected == &[16, 8] && found == &[8, 16]),
        "`fc1.weight` has shape [8, 16], expected [16, 8]",
    );
    let retyped = edit(&|p| p.header["optimizer.velocity.fc1.bias"]["dtype"] = "I32".into());
    check(
        &retyped,
        &|e| matches!(e, CheckpointError::Dtype { name, .. } if name == "optimizer.velocity.fc1.bias"),
        "holds I32 values, expected F32",
    );
    let negative = edit(&|p| {
        let off = p.info("train.step")["data_offsets"][0].as_u64().unwrap() as usize;
        p.data[off..off + 8].copy_from_slice(&(-3i64).to_le_bytes());
    });
    check(
        &negative,
        &|e| matches!(e, CheckpointError::Value { name, .. } if name == "train.step"),
        "holds -3",
    );
    let bad_hyper = edit(&|p| p.header["__metadata__"]["optimizer.hyper.lr"] = "fast".into());
    check(
        &bad_hyper,
        &|e| matches!(e, CheckpointError::Metadata { key, .. } if key == "optimizer.hyper.lr"),
        "`optimizer.hyper.lr` is `fast`, expected a number",
    );
    let version = edit(&|p| p.header["__metadata__"]["format_version"] = "99".into());
    check(
        &version,
        &|e| matches!(e, CheckpointError::Metadata { key, .. } if key == "format_version"),
        "`format_version` is `99`",
    );
    let foreign = edit(&|p| {
        p.header.remove("__metadata__");
    });
    check(
        &foreign,
        &|e| matches!(e, CheckpointError::Metadata { key, found: None, .. } if key == "format"),
        "has no `format`",
    );

    let tiny = Tiny::init(Seed(1));
    let tiny_step = TrainStep::<Tiny, keras::Adam, 8>::new(&tiny, keras::Adam::default());
    check(
        &checkpoint::to_bytes(&tiny, &tiny_step).unwrap(),
        &|e| matches!(e, CheckpointError::Layer { .. }),
        "another model: `fc: Dense<3, 2, linear, bias: true>` in the file, \
         `fc1: Dense<8, 16, relu, bias: true>` in this model",
    );
    let sgd = TrainStep::<Mlp, keras::SgdMomentum, 8>::new(&model, Default::default());
    check(
        &checkpoint::to_bytes(&model, &sgd).unwrap(),
        &|e| matches!(e, CheckpointError::Optimizer { what: "name", .. }),
        "its name `SgdMomentum`, this optimizer's `Adam`",
    );
    let ema = Config::default().ema(Ema {
        momentum: 0.99,
        overwrite_every: 0,
    });
    let with_ema = TrainStep::<Mlp, keras::Adam, 8>::with_config(&model, Default::default(), ema);
    check(
        &checkpoint::to_bytes(&model, &with_ema).unwrap(),
        &|e| matches!(e, CheckpointError::UnexpectedTensor { name } if name.starts_with("optimizer.ema.")),
        "optimizer.ema.fc1.bias",
    );

    check(
        &good[..good.len() - 1],
        &|e| matches!(e, CheckpointError::Truncated { .. }),
        "truncated",
    );
    check(
        &good[..5],
        &|e| matches!(e, CheckpointError::Truncated { .. }),
        "truncated",
    );
    let mut garbled = good.clone();
    garbled[8] = b'#';
    check(
        &garbled,
        &|e| matches!(e, CheckpointError::Header { .. }),
        "header is corrupt",
    );

    let dir = scratch("bad-files");
    let missing = dir.join("nothing.safetensors");
    let err = checkpoint::load(&missing, &mut target, &mut train).unwrap_err();
    assert!(matches!(err, CheckpointError::Io { action: "read", .. }));
    assert!(err.to_string().contains("nothing.safetensors"), "{err}");

    // And the file this all started from does load.
    checkpoint::from_bytes(&good, &mut target, &mut train).unwrap();
    assert_eq!(bits(target.params()), bits(model.params()));
}

/// A write that fails at any point (after any number of bytes, at the flush, the sync or the
/// rename) leaves the old checkpoint, which loads with its old values, and no temporary file.
#[test]
fn failed_writes_leave_the_old_checkpoint() {
    let dir = scratch("faults");
    let path = dir.join("run.safetensors");
    let mut model = Mlp::init(Seed(1));
    let mut step = TrainStep::<Mlp, keras::Adam, 8>::new(&model, keras::Adam::default());
    checkpoint::save(&path, &model, &step).unwrap();
    let old = snapshot(&model, &step);
    let (x, y) = batch(4, 8, Mlp::IN);
    step.run(&mut model, &x, &y);
    let new = checkpoint::to_bytes(&model, &step).unwrap();
    assert_ne!(snapshot(&model, &step), old);

    let len = new.len();
    let mut faults: Vec<Fault> = (0..len).step_by(97).map(Fault::AfterBytes).collect();
    faults.extend([0, 1, 7, 8, 9, len / 2, len - 1].map(Fault::AfterBytes));
    faults.extend([Fault::Flush, Fault::Sync, Fault::Rename]);
    for fault in faults {
        let err = atomic::write_atomic_failing(&path, &new, fault).unwrap_err();
        assert_eq!(err.path.parent(), Some(&*dir.0), "{fault:?}: {err}");
        assert_eq!(files(&dir.0), ["run.safetensors"], "{fault:?} left a file");
        let mut m = Mlp::init(Seed(9));
        let mut s = TrainStep::<Mlp, keras::Adam, 8>::new(&m, keras::Adam::default());
        checkpoint::load(&path, &mut m, &mut s).unwrap();
        assert_eq!(snapshot(&m, &s), old, "{fault:?}");
    }

    // A failure to sync the directory comes after the rename: the new file is in place, and
    // the error says it may not be durable.
    let err = atomic::write_atomic_failing(&path, &new, Fault::SyncDir).unwrap_err();
    assert_eq!(err.action, "sync directory");
    assert_eq!(files(&dir.0), ["run.safetensors"]);
    assert_eq!(std::fs::read(&path).unwrap(), new);
    atomic::write_atomic(&path, &new).unwrap();
    assert_eq!(files(&dir.0), ["run.safetensors"]);
}

/// The environment variable that makes [`child_saves_generations_until_killed`] run: the path
/// it saves to.
const CHILD: &str = "FUSEGRAPH_CHECKPOINT_CHILD";

/// A train step of [`Big`] whose every value is `g`.
fn generation(model: &mut Big, step: &mut TrainStep<Big, keras::Adam, 1>, g: u64) {
    model.params_mut().fill(g as f32);
    let opt = step.optimizer_mut();
    for slot in ["momentum", "velocity"] {
        opt.slot_tensor_mut(slot, 0).unwrap().fill(g as f32);
    }
    opt.set_iterations(g);
}

/// The generation a checkpoint of [`Big`] holds, after checking that every value has it.
fn generation_of(path: &Path) -> u64 {
    let mut model = Big::init(Seed(0));
    let mut step = TrainStep::<Big, keras::Adam, 1>::new(&model, keras::Adam::default());
    checkpoint::load(path, &mut model, &mut step).expect("a torn checkpoint");
    let g = step.optimizer().iterations();
    let opt = step.optimizer();
    let values = [
        model.params(),
        opt.slot("momentum").unwrap(),
        opt.slot("velocity").unwrap(),
    ];
    for v in values {
        assert!(v.iter().all(|&x| x == g as f32), "generation {g} mixed");
    }
    g
}

/// Run by [`killed_writers_never_tear_the_checkpoint`] in a child process: saves generation
/// after generation until killed.
#[test]
#[ignore = "run by killed_writers_never_tear_the_checkpoint in a child process"]
fn child_saves_generations_until_killed() {
    let Some(path) = std::env::var_os(CHILD) else {
        return;
    };
    let path = PathBuf::from(path);
    let mut model = Big::init(Seed(0));
    let mut step = TrainStep::<Big, keras::Adam, 1>::new(&model, keras::Adam::default());
    let mut g = generation_of(&path);
    loop {
        g += 1;
        generation(&mut model, &mut step, g);
        checkpoint::save(&path, &model, &step).unwrap();
    }
}

/// Kills a process that saves large checkpoints in a loop at several moments: each time the
/// file holds one complete generation, at least as new as the last one seen.
#[test]
fn killed_writers_never_tear_the_checkpoint() {
    let dir = scratch("kill");
    let path = dir.join("run.safetensors");
    let mut model = Big::init(Seed(0));
    let mut step = TrainStep::<Big, keras::Adam, 1>::new(&model, keras::Adam::default());
    generation(&mut model, &mut step, 0);
    checkpoint::save(&path, &model, &step).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut last = 0;
    for delay_ms in [0, 3, 10, 25, 60] {
        let mut child = Command::new(&exe)
            .args([
                "child_saves_generations_until_killed",
                "--exact",
                "--ignored",
            ])
            .env(CHILD, &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the child's first new generation, so the kill lands inside its loop.
        let start = Instant::now();
        while generation_of(&path) == last {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the child saves nothing"
            );
            assert!(child.try_wait().unwrap().is_none(), "the child stopped");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let g = generation_of(&path);
        assert!(g > last, "generation {g} after {last}");
        last = g;
    }
}

/// The module docs' example.
#[test]
fn docs_example() -> Result<(), CheckpointError> {
    let dir = scratch("docs");
    let path = dir.join("run.safetensors");
    let (x, y) = batch(5, 4, Mlp::IN);

    let mut model = Mlp::init(Seed(7));
    let mut step = TrainStep::<_, _, 32>::new(&model, keras::Adam::default());
    step.run(&mut model, &x, &y);
    checkpoint::save_with(&path, &model, &step, &[("epoch", "3")])?;

    let mut resumed = Mlp::init(Seed(8));
    let mut step = TrainStep::<_, _, 32>::new(&resumed, keras::Adam::default());
    let meta = checkpoint::load(&path, &mut resumed, &mut step)?;
    assert_eq!(meta.get("epoch"), Some("3"));
    assert_eq!(bits(resumed.params()), bits(model.params()));
    Ok(())
}

/// What `load` does with a corrupted copy of a valid checkpoint: `Ok` leaves buffers of the
/// right lengths, `Err` changes nothing; neither panics.
fn load_corrupted(bytes: &[u8]) {
    let mut model = Normed::init(Seed(3));
    let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&model, keras::Adam::default());
    let before = snapshot(&model, &step);
    match checkpoint::from_bytes(bytes, &mut model, &mut step) {
        Ok(_) => {
            assert_eq!(model.params().len(), Normed::PARAMS);
            assert_eq!(model.state().len(), Normed::STATE);
            assert_eq!(
                step.optimizer().slot("momentum").unwrap().len(),
                Normed::PARAMS
            );
        }
        Err(_) => assert_eq!(snapshot(&model, &step), before),
    }
    let mut model = Normed::init(Seed(3));
    let _ = checkpoint::model_from_bytes(bytes, &mut model);
}

fn valid_checkpoint() -> Vec<u8> {
    saved_normed().0
}

/// A checkpoint of a `Normed` after a step of Adam with lr 0.003, and the snapshot of what it
/// holds.
fn saved_normed() -> (Vec<u8>, Vec<Vec<u32>>) {
    let mut model = Normed::init(Seed(1));
    let adam = keras::Adam::default().with_lr(3e-3);
    let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&model, adam);
    let (x, y) = batch(2, 4, Normed::IN);
    step.run(&mut model, &x, &y);
    let bytes = checkpoint::to_bytes_with(&model, &step, &[("epoch", "1")]).unwrap();
    (bytes, snapshot(&model, &step))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn corrupted_bytes_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        header_bias in any::<bool>(),
    ) {
        let mut bytes = valid_checkpoint();
        // Half the cases edit the header (where a byte matters most), half anywhere.
        let n = if header_bias {
            8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
        } else {
            bytes.len()
        };
        for (at, value) in edits {
            bytes[at.index(n)] = value;
        }
        load_corrupted(&bytes);
    }

    #[test]
    fn truncated_bytes_are_errors(cut in any::<prop::sample::Index>()) {
        let bytes = valid_checkpoint();
        let at = cut.index(bytes.len());
        let mut model = Normed::init(Seed(3));
        let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&model, keras::Adam::default());
        prop_assert!(checkpoint::from_bytes(&bytes[..at], &mut model, &mut step).is_err());
        load_corrupted(&bytes[..at]);
    }
}

fusegraph::optimizer! {
    /// Momentum whose slot is named as the EMA's tensors are.
    pub struct SlotNamedEma {
        hyper  { lr: f32 = 0.1 }
        slots  { ema = 0.0 }
        update {
            ema = ema * 0.9 + g;
            p -= lr * ema;
        }
    }
}

#[test]
fn names_that_clash_are_an_error() {
    let model = Tiny::init(Seed(1));
    let config = Config::default().ema(Ema {
        momentum: 0.9,
        overwrite_every: 0,
    });
    let step =
        TrainStep::<Tiny, SlotNamedEma, 2>::with_config(&model, SlotNamedEma::default(), config);
    let err = checkpoint::to_bytes(&model, &step).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Clash { name } if name == "optimizer.ema.fc.weight"),
        "{err}"
    );
    let plain = TrainStep::<Tiny, SlotNamedEma, 2>::new(&model, SlotNamedEma::default());
    checkpoint::to_bytes(&model, &plain).expect("without an EMA the slot's names are free");
}

/// A safetensors file of header text `json` (padded) and `data`.
fn with_header(json: &str, data: &[u8]) -> Vec<u8> {
    let mut json = json.as_bytes().to_vec();
    json.resize(json.len().next_multiple_of(8), b' ');
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend(data);
    out
}

/// Headers that describe impossible tensors give errors that name the tensor, change nothing
/// and never panic: offsets summing past `usize::MAX` (which overflowed inside `safetensors`),
/// a shape whose size overflows, a dtype whose size does not match the bytes, a name given
/// twice.
#[test]
fn impossible_headers_name_their_tensor_and_never_panic() {
    let mut model = Tiny::init(Seed(1));
    let mut step = TrainStep::<Tiny, keras::Adam, 2>::new(&model, keras::Adam::default());
    let good = checkpoint::to_bytes(&model, &step).unwrap();
    let before = snapshot(&model, &step);
    let mut check = |bytes: &[u8], says: &str| {
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            checkpoint::from_bytes(bytes, &mut model, &mut step)
        }));
        let err = loaded.expect("no panic").unwrap_err();
        assert!(
            err.to_string().contains(says),
            "`{err}` should say `{says}`"
        );
        assert_eq!(snapshot(&model, &step), before);
    };

    let mut p = Parsed::new(&good);
    let mut start = p.data.len() as u64;
    let chunk = (u64::MAX - start) / 8;
    for i in 0..8 {
        let end = if i == 7 { u64::MAX } else { start + chunk };
        let info = serde_json::json!({"dtype": "U8", "shape": [end - start], "data_offsets": [start, end]});
        p.header.insert(format!("x{i}"), info);
        start = end;
    }
    check(&p.bytes(), "truncated");

    let mut p = Parsed::new(&good);
    p.header["fc.weight"]["shape"] = serde_json::json!([1u64 << 40, 1u64 << 40]);
    check(
        &p.bytes(),
        "tensor `fc.weight`: shape [1099511627776, 1099511627776] of F32 has more bytes than a u64 counts",
    );

    let mut p = Parsed::new(&good);
    p.header["fc.weight"]["dtype"] = "F64".into();
    check(
        &p.bytes(),
        "tensor `fc.weight`: shape [2, 3] of F64 needs 48 bytes, data_offsets [24, 48] hold 24",
    );

    let p = Parsed::new(&good);
    let bias = p.header["fc.bias"].to_string();
    let json = serde_json::to_string(&p.header).unwrap();
    let twice = json.replacen(
        "\"fc.bias\":",
        &format!("\"fc.bias\":{bias},\"fc.bias\":"),
        1,
    );
    check(
        &with_header(&twice, &p.data),
        "the header names `fc.bias` twice",
    );

    checkpoint::from_bytes(&good, &mut model, &mut step).expect("the original loads");
}

/// Names that clash are refused on load as on save: a file must not fill two buffers from one
/// tensor.
#[test]
fn names_that_clash_are_an_error_on_load() {
    let model = Tiny::init(Seed(1));
    let plain = TrainStep::<Tiny, SlotNamedEma, 2>::new(&model, SlotNamedEma::default());
    let bytes = checkpoint::to_bytes(&model, &plain).unwrap();
    let config = Config::default().ema(Ema {
        momentum: 0.9,
        overwrite_every: 0,
    });
    let mut target = Tiny::init(Seed(2));
    let mut step =
        TrainStep::<Tiny, SlotNamedEma, 2>::with_config(&target, SlotNamedEma::default(), config);
    let err = checkpoint::from_bytes(&bytes, &mut target, &mut step).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Clash { name } if name == "optimizer.ema.fc.weight"),
        "{err}"
    );
}

/// A step counter beyond what an I64 holds is an error on save (it used to be written
/// negative, which no load accepts); the largest I64 loads back.
#[test]
fn step_counts_round_trip_up_to_the_largest_i64() {
    let mut model = Tiny::init(Seed(1));
    let mut step = TrainStep::<Tiny, keras::Adam, 2>::new(&model, keras::Adam::default());
    step.optimizer_mut().set_iterations(1 << 63);
    let err = checkpoint::to_bytes(&model, &step).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Value { name, .. } if name == "train.step"),
        "{err}"
    );
    step.optimizer_mut().set_iterations(i64::MAX as u64);
    let bytes = checkpoint::to_bytes(&model, &step).unwrap();
    step.optimizer_mut().set_iterations(0);
    checkpoint::from_bytes(&bytes, &mut model, &mut step).unwrap();
    assert_eq!(step.optimizer().iterations(), i64::MAX as u64);
}

/// Two stacked GRU layers, then a classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct GruNet {
    gru: Gru<3, 2, 4, 2>,
    fc: Dense<4, 4>,
}

/// `nn.GRU(2, 4, num_layers=2).state_dict()` of `GruNet`'s `gru`, in the model's order,
/// untransposed.
const GRU_NET_GRU: [(&str, &[usize]); 8] = [
    ("gru.weight_ih_l0", &[12, 2]),
    ("gru.weight_hh_l0", &[12, 4]),
    ("gru.bias_ih_l0", &[12]),
    ("gru.bias_hh_l0", &[12]),
    ("gru.weight_ih_l1", &[12, 4]),
    ("gru.weight_hh_l1", &[12, 4]),
    ("gru.bias_ih_l1", &[12]),
    ("gru.bias_hh_l1", &[12]),
];

/// Two stacked bidirectional GRU layers, then a classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct BiGruNet {
    gru: BiGru<3, 2, 4, 2>,
    fc: Dense<8, 4>,
}

/// `nn.GRU(2, 4, num_layers=2, bidirectional=True).state_dict()` of `BiGruNet`'s `gru`, in
/// the model's order, untransposed: each layer's forward tensors, then its reverse ones; the
/// second layer reads both directions.
const BI_GRU_NET_GRU: [(&str, &[usize]); 16] = [
    ("gru.weight_ih_l0", &[12, 2]),
    ("gru.weight_hh_l0", &[12, 4]),
    ("gru.bias_ih_l0", &[12]),
    ("gru.bias_hh_l0", &[12]),
    ("gru.weight_ih_l0_reverse", &[12, 2]),
    ("gru.weight_hh_l0_reverse", &[12, 4]),
    ("gru.bias_ih_l0_reverse", &[12]),
    ("gru.bias_hh_l0_reverse", &[12]),
    ("gru.weight_ih_l1", &[12, 8]),
    ("gru.weight_hh_l1", &[12, 4]),
    ("gru.bias_ih_l1", &[12]),
    ("gru.bias_hh_l1", &[12]),
    ("gru.weight_ih_l1_reverse", &[12, 8]),
    ("gru.weight_hh_l1_reverse", &[12, 4]),
    ("gru.bias_ih_l1_reverse", &[12]),
    ("gru.bias_hh_l1_reverse", &[12]),
];

#[test]
fn recurrent_tensors_keep_pytorch_names_and_layouts_and_round_trip() {
    recurrent_round_trip(
        "gru",
        GruNet::init(Seed(11)),
        GruNet::init(Seed(12)),
        &GRU_NET_GRU,
    );
    let (model, other) = (BiGruNet::init(Seed(13)), BiGruNet::init(Seed(14)));
    recurrent_round_trip("bigru", model, other, &BI_GRU_NET_GRU);
}

/// `model`, trained one step, saves its recurrent layer's `tensors` with PyTorch's names,
/// shapes and values (its classifier `fc` after them), and `other` loads the file and trains
/// on to the same bits.
fn recurrent_round_trip<M: Model<Input = f32, Loss = SoftmaxCrossEntropy>>(
    name: &str,
    mut model: M,
    mut other: M,
    tensors: &[(&str, &[usize])],
) {
    let dir = scratch(name);
    let file = dir.join("gru.safetensors");
    let mut step = TrainStep::<M, torch::Adam, 4>::new(&model, torch::Adam::default());
    let (x, y) = batch(4, 4, M::IN);
    step.run(&mut model, &x, &y);
    let f = Parsed::new(&checkpoint::to_bytes(&model, &step).unwrap());
    let params = model.params();
    let mut offset = 0;
    for &(name, shape) in tensors {
        assert_eq!(f.shape(name), shape, "{name}");
        let len: usize = shape.iter().product();
        assert_eq!(
            bits(&f.f32s(name)),
            bits(&params[offset..offset + len]),
            "{name}"
        );
        assert_eq!(f.shape(&format!("optimizer.exp_avg.{name}")), shape);
        offset += len;
    }
    assert_eq!(f.shape("fc.weight")[0], 4);
    checkpoint::save(&file, &model, &step).unwrap();
    let mut resumed = TrainStep::<M, torch::Adam, 4>::new(&other, torch::Adam::default());
    checkpoint::load(&file, &mut other, &mut resumed).unwrap();
    assert_eq!(bits(other.params()), bits(model.params()));
    let next = step.run(&mut model, &x, &y);
    assert_eq!(resumed.run(&mut other, &x, &y).to_bits(), next.to_bits());
    assert_eq!(bits(other.params()), bits(model.params()));
}

/// Loads `bytes` into a fresh `Normed` and Adam step; on success, what they hold, on failure
/// the error (after checking that nothing changed).
fn load_normed(bytes: &[u8]) -> Result<Vec<Vec<u32>>, CheckpointError> {
    let mut model = Normed::init(Seed(3));
    let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&model, keras::Adam::default());
    let before = snapshot(&model, &step);
    match checkpoint::from_bytes(bytes, &mut model, &mut step) {
        Ok(_) => Ok(snapshot(&model, &step)),
        Err(e) => {
            assert_eq!(snapshot(&model, &step), before, "changed by a failed load");
            Err(e)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// One flipped bit anywhere in a checkpoint (half the cases in its header) is an error, or
    /// the file loads exactly what was saved: parameters, state, slots, step, seed and
    /// hyper-parameters, bit for bit.
    #[test]
    fn a_flipped_bit_is_an_error_or_changes_nothing(
        bit in any::<prop::sample::Index>(),
        in_header in any::<bool>(),
    ) {
        let (mut bytes, saved) = saved_normed();
        let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let at = bit.index(8 * if in_header { header } else { bytes.len() });
        bytes[at / 8] ^= 1 << (at % 8);
        if let Ok(loaded) = load_normed(&bytes) {
            prop_assert_eq!(loaded, saved.clone());
        }
        let mut model = Normed::init(Seed(3));
        if checkpoint::model_from_bytes(&bytes, &mut model).is_ok() {
            prop_assert_eq!(
                [bits(model.params()), bits(model.state())],
                [saved[0].clone(), saved[1].clone()]
            );
        }
    }
}

/// A damaged byte of a tensor names the tensor; a damaged hyper-parameter (`0.003` read as
/// `0.001`, one bit) is damaged metadata.
#[test]
fn damage_names_the_tensor_or_the_metadata() {
    let (good, saved) = saved_normed();
    let p = Parsed::new(&good);
    let data_start = good.len() - p.data.len();
    for name in [
        "fc1.weight",
        "bn.running_var",
        "optimizer.velocity.head.bias",
        "train.seed",
    ] {
        let at = data_start + p.info(name)["data_offsets"][0].as_u64().unwrap() as usize;
        let mut bytes = good.clone();
        bytes[at] ^= 0x10;
        let err = load_normed(&bytes).unwrap_err();
        assert!(
            matches!(&err, CheckpointError::Checksum { name: n, stored, computed }
                if n == name && stored != computed && *stored == crc32(p.raw(name))),
            "{err}"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "checkpoint tensor `{name}` is damaged: its CRC-32 is "
            )),
            "{err}"
        );
    }
    let lr = b"\"optimizer.hyper.lr\":\"0.003\"";
    let at = good.windows(lr.len()).position(|w| w == lr).unwrap() + lr.len() - 2;
    let mut bytes = good.clone();
    bytes[at] ^= 0b10;
    assert_eq!(bytes[at], b'1');
    let err = load_normed(&bytes).unwrap_err();
    assert!(
        matches!(err, CheckpointError::MetadataChecksum { .. }),
        "{err}"
    );
    assert!(err
        .to_string()
        .starts_with("checkpoint metadata is damaged"));
    assert_eq!(load_normed(&good).unwrap(), saved);
}

/// A file of format version 1 (no checksums, no layer kinds) loads with two warnings, even
/// into a model with another activation, which version 1 cannot tell apart; its signature of
/// names and shapes is still checked.
#[test]
fn files_of_format_version_1_load_with_warnings() {
    let legacy = |bytes: &[u8]| {
        let mut p = Parsed::new(bytes);
        let meta = p.header["__metadata__"].as_object_mut().unwrap();
        meta.retain(|k, _| {
            !k.starts_with("checksum.") && k != "metadata_checksum" && k != "model_layers"
        });
        meta.insert("format_version".into(), "1".into());
        p.unsealed_bytes()
    };
    let (good, saved) = saved_normed();
    let old = legacy(&good);
    let mut model = Normed::init(Seed(3));
    let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&model, keras::Adam::default());
    let meta = checkpoint::from_bytes(&old, &mut model, &mut step).unwrap();
    assert_eq!(
        meta.warnings(),
        [Warning::NoChecksums, Warning::LayersUnchecked]
    );
    assert_eq!(snapshot(&model, &step), saved);
    assert!(meta.warnings()[1]
        .to_string()
        .contains("not activations, losses or layer options"));

    let tiny = legacy(&checkpoint::model_to_bytes(&Tiny::init(Seed(1))).unwrap());
    let meta = checkpoint::model_from_bytes(&tiny, &mut TinyTanh::init(Seed(2))).unwrap();
    assert_eq!(meta.warnings().len(), 2);
    let err = checkpoint::model_from_bytes(&tiny, &mut Mlp::init(Seed(2))).unwrap_err();
    assert!(matches!(err, CheckpointError::Signature { .. }), "{err}");
}

/// A NaN or an infinity is refused, naming the tensor and the index in the file's order, and
/// loads with a warning when accepted.
#[test]
fn non_finite_values_are_refused_unless_accepted() {
    let mut model = Tiny::init(Seed(1));
    // Stored [in = 3, out = 2]: value (in 2, out 0) is PyTorch's [0][2], index 2.
    model.params_mut()[4] = f32::NAN;
    let bytes = checkpoint::model_to_bytes(&model).unwrap();
    let mut target = Tiny::init(Seed(2));
    let before = bits(target.params());
    let err = checkpoint::model_from_bytes(&bytes, &mut target).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::NonFinite { name, index: 2, value } if name == "fc.weight" && value.is_nan()),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "checkpoint tensor `fc.weight` holds NaN at index 2; \
         load with `Loader::new().allow_non_finite()` (a PyTorch file: \
         `TorchImport::new().allow_non_finite()`) to accept it"
    );
    assert_eq!(bits(target.params()), before);
    let meta = Loader::new()
        .allow_non_finite()
        .model_from_bytes(&bytes, &mut target)
        .unwrap();
    let warning = Warning::NonFinite {
        name: "fc.weight".into(),
        index: 2,
    };
    assert_eq!(meta.warnings(), [warning]);
    assert_eq!(bits(target.params()), bits(model.params()));

    let dir = scratch("non-finite");
    let path = dir.join("run.safetensors");
    let mut step = TrainStep::<Tiny, keras::Adam, 2>::new(&model, keras::Adam::default());
    model.params_mut()[4] = 0.5;
    model.params_mut()[7] = f32::NEG_INFINITY;
    checkpoint::save(&path, &model, &step).unwrap();
    let err = checkpoint::load(&path, &mut target, &mut step).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::NonFinite { name, index: 1, .. } if name == "fc.bias"),
        "{err}"
    );
    assert!(err.to_string().contains("holds -inf at index 1"), "{err}");
    let meta = Loader::new()
        .allow_non_finite()
        .load(&path, &mut target, &mut step)
        .unwrap();
    assert_eq!(meta.warnings().len(), 1);
    assert_eq!(bits(target.params()), bits(model.params()));
}

/// Saving into a directory that does not exist names the path given; a save removes the
/// temporary files that killed saves of the same file left, and nothing else.
#[test]
fn saves_name_the_path_given_and_clean_up_after_killed_saves() {
    let dir = scratch("paths");
    let model = Tiny::init(Seed(1));
    let missing = dir.join("no-such-dir").join("run.safetensors");
    let err = checkpoint::save_model(&missing, &model).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Io { path, action: "create", .. } if *path == missing),
        "{err}"
    );
    assert!(
        err.to_string().starts_with(&format!(
            "checkpoint `{}`: create failed: ",
            missing.display()
        )),
        "{err}"
    );

    let path = dir.join("run.safetensors");
    for name in [
        ".run.safetensors.4000001.0-17.tmp",
        ".run.safetensors.4000002.3-99.tmp",
        ".best.safetensors.4000001.0-17.tmp",
        "notes.tmp",
    ] {
        std::fs::write(dir.join(name), b"partial").unwrap();
    }
    checkpoint::save_model(&path, &model).unwrap();
    assert_eq!(
        files(&dir.0),
        [
            ".best.safetensors.4000001.0-17.tmp",
            "notes.tmp",
            "run.safetensors"
        ]
    );
}

/// `Tiny` with another activation.
#[fusegraph::model(loss = Mse)]
pub struct TinyTanh {
    fc: Dense<3, 2, Tanh>,
}

/// `Tiny` with another loss.
#[fusegraph::model(loss = Mae)]
pub struct TinyMae {
    fc: Dense<3, 2>,
}

/// A leaky ReLU of PyTorch's slope, 1/100.
#[fusegraph::model(loss = Mse)]
pub struct TinyLeaky {
    fc: Dense<3, 2, LeakyRelu>,
}

/// A leaky ReLU of Keras' slope, 3/10.
#[fusegraph::model(loss = Mse)]
pub struct TinySteep {
    fc: Dense<3, 2, LeakyRelu<3, 10>>,
}

/// Max pooling, then a Dense.
#[fusegraph::model(loss = Mse)]
pub struct MaxPooled {
    pool: MaxPool2d<4, 4, 1, 2>,
    flat: Flatten<4>,
    fc: Dense<4, 2>,
}

/// `MaxPooled` with average pooling: the same tensors.
#[fusegraph::model(loss = Mse)]
pub struct AvgPooled {
    pool: AvgPool2d<4, 4, 1, 2>,
    flat: Flatten<4>,
    fc: Dense<4, 2>,
}

/// `Conv` with another activation of its convolution.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct ConvTanh {
    conv: Conv2d<5, 5, 2, 3, 3, 3, 1, Valid, Tanh>,
    bn: BatchNorm<3, 9>,
    flat: Flatten<27>,
    fc: Dense<27, 4>,
}

/// `Seq` with another activation of its Conv1d.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SeqGelu {
    conv: Conv1d<6, 2, 3, 3, 1, Same, Gelu>,
    proj: PerPosition<Dense<3, 4>, 6>,
    pool: MeanOverTime<6, 4>,
}

/// `Seq` with another activation of its per-position Dense.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SeqProjTanh {
    conv: Conv1d<6, 2, 3, 3, 1, Same, Relu>,
    proj: PerPosition<Dense<3, 4, Tanh>, 6>,
    pool: MeanOverTime<6, 4>,
}

/// `Normed` with another dropout rate.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct NormedDrop {
    fc1: Dense<8, 16, Relu>,
    bn: BatchNorm<16>,
    drop: Dropout<16, 500>,
    ln: LayerNorm<16>,
    head: Dense<16, 4>,
}

/// A GRU giving its last state.
#[fusegraph::model(loss = Mse)]
pub struct GruLast {
    gru: Gru<3, 2, 4>,
}

/// A GRU giving every state: the same tensors.
#[fusegraph::model(loss = Mse)]
pub struct GruAll {
    gru: Gru<3, 2, 4, 1, Sequence>,
}

/// An embedding with padding id 0.
#[fusegraph::model(loss = Mse, input = u32)]
pub struct Padded {
    tok: Embedding<10, 4, 3, 0>,
}

/// An embedding without a padding id: the same tensor.
#[fusegraph::model(loss = Mse, input = u32)]
pub struct Unpadded {
    tok: Embedding<10, 4, 3, { fusegraph::layers::embedding::NO_PADDING }>,
}

/// Attention with one head.
#[fusegraph::model(loss = Mse)]
pub struct OneHead {
    attn: CausalSelfAttention<4, 8, 1>,
}

/// Attention with two heads: the same tensors.
#[fusegraph::model(loss = Mse)]
pub struct TwoHeads {
    attn: CausalSelfAttention<4, 8, 2>,
}

/// A graph with a ReLU between its layers.
#[fusegraph::model(loss = Mse, graph(h = fc1(x).relu(), y = fc2(h)))]
pub struct GraphRelu {
    fc1: Dense<3, 4>,
    fc2: Dense<4, 2>,
}

/// The same graph with a tanh.
#[fusegraph::model(loss = Mse, graph(h = fc1(x).tanh(), y = fc2(h)))]
pub struct GraphTanh {
    fc1: Dense<3, 4>,
    fc2: Dense<4, 2>,
}

fusegraph::activation! {
    /// A softplus of sharpness `beta`.
    pub SharpSoftplus { beta: f32 = 2.0 } (x) = softplus(beta * x) / beta;
}

fusegraph::loss! {
    /// The pinball loss of quantile tau.
    pub Pinball { tau: f32 = 0.9 } (pred, target) =
        max(tau * (target - pred), (tau - 1.0) * (target - pred));
}

/// User definitions with constants.
#[fusegraph::model(loss = Pinball)]
pub struct Custom {
    fc: Dense<3, 2, SharpSoftplus>,
    act: Act<SharpSoftplus, 2>,
}

/// The model of `a` does not load into `b`: the error is the first layer that differs, both
/// sides in its message, and `b` is unchanged.
fn refused<A: Model, B: Model>(a: &A, b: &mut B, says: &str) {
    let bytes = checkpoint::model_to_bytes(a).unwrap();
    let before = bits(b.params());
    let err = checkpoint::model_from_bytes(&bytes, b).unwrap_err();
    assert!(matches!(err, CheckpointError::Layer { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("checkpoint is for another model: {says}")
    );
    assert_eq!(bits(b.params()), before);
}

/// Models whose tensors have the same names and shapes, differing only in one layer's kind,
/// an option of it or the loss, refuse each other's checkpoints, naming that layer.
#[test]
fn every_layer_kind_and_option_is_part_of_the_model() {
    let dense = |a: &str| format!("Dense<3, 2, {a}, bias: true>");
    refused(
        &Tiny::init(Seed(1)),
        &mut TinyTanh::init(Seed(1)),
        &format!(
            "fc: {} in the file, {} in this model",
            dense("linear"),
            dense("tanh")
        ),
    );
    refused(
        &Tiny::init(Seed(1)),
        &mut TinyMae::init(Seed(1)),
        "loss: Mse in the file, Mae in this model",
    );
    refused(
        &TinyLeaky::init(Seed(1)),
        &mut TinySteep::init(Seed(1)),
        &format!(
            "fc: {} in the file, {} in this model",
            dense("leaky_relu(1/100)"),
            dense("leaky_relu(3/10)")
        ),
    );
    refused(
        &MaxPooled::init(Seed(1)),
        &mut AvgPooled::init(Seed(1)),
        "pool: MaxPool2d<4x4x1, 2x2/2> in the file, AvgPool2d<4x4x1, 2x2/2> in this model",
    );
    refused(
        &Conv::init(Seed(1)),
        &mut ConvTanh::init(Seed(1)),
        "conv: Conv2d<5x5x2 -> 3x3x3, 3x3/1, valid, relu> in the file, \
         Conv2d<5x5x2 -> 3x3x3, 3x3/1, valid, tanh> in this model",
    );
    refused(
        &Seq::init(Seed(1)),
        &mut SeqGelu::init(Seed(1)),
        "conv: Conv1d<6x2 -> 6x3, 3/1, same, relu> in the file, \
         Conv1d<6x2 -> 6x3, 3/1, same, gelu> in this model",
    );
    refused(
        &Seq::init(Seed(1)),
        &mut SeqProjTanh::init(Seed(1)),
        "proj: PerPosition<Dense<3, 4, linear, bias: true>, 6> in the file, \
         PerPosition<Dense<3, 4, tanh, bias: true>, 6> in this model",
    );
    refused(
        &Normed::init(Seed(1)),
        &mut NormedDrop::init(Seed(1)),
        "drop: Dropout<16, rate: 300/1000> in the file, Dropout<16, rate: 500/1000> in this model",
    );
    refused(
        &GruLast::init(Seed(1)),
        &mut GruAll::init(Seed(1)),
        "gru: GRU<3 steps, 2 -> 4, layers: 1, last> in the file, \
         GRU<3 steps, 2 -> 4, layers: 1, sequence> in this model",
    );
    refused(
        &Padded::init(Seed(1)),
        &mut Unpadded::init(Seed(1)),
        "tok: Embedding<10 x 4, 3 positions, padding: 0> in the file, \
         Embedding<10 x 4, 3 positions, padding: none> in this model",
    );
    let attention = |heads: usize| {
        format!("CausalSelfAttention<4 positions, 8, heads: {heads}, biases q k v out: true true true true>")
    };
    refused(
        &OneHead::init(Seed(1)),
        &mut TwoHeads::init(Seed(1)),
        &format!(
            "attn: {} in the file, {} in this model",
            attention(1),
            attention(2)
        ),
    );
    refused(
        &GraphRelu::init(Seed(1)),
        &mut GraphTanh::init(Seed(1)),
        "graph: n0 = fc1(x); n1 = relu(n0); n2 = fc2(n1) in the file, \
         n0 = fc1(x); n1 = tanh(n0); n2 = fc2(n1) in this model",
    );
    refused(
        &Mlp::init(Seed(1)),
        &mut Normed::init(Seed(1)),
        "`fc2: Dense<16, 4, linear, bias: true>` in the file, \
         `bn: BatchNorm<16, spatial: 1>` in this model",
    );
}

/// The layers a checkpoint records: one `name: kind` line per layer, then the loss; the
/// constants of `activation!` and `loss!` definitions are part of their kinds.
#[test]
fn layers_are_listed_with_their_options_and_constants() {
    assert_eq!(
        checkpoint::layers::<Mlp>(),
        "fc1: Dense<8, 16, relu, bias: true>\n\
         fc2: Dense<16, 4, linear, bias: true>\n\
         loss: SoftmaxCrossEntropy"
    );
    assert_eq!(
        checkpoint::layers::<Custom>(),
        "fc: Dense<3, 2, sharp_softplus { beta: 2 }, bias: true>\n\
         act: Act<sharp_softplus { beta: 2 }, 2>\n\
         loss: Pinball { tau: 0.9 }"
    );
    let file = Parsed::new(&checkpoint::model_to_bytes(&Mlp::init(Seed(1))).unwrap());
    let layers = checkpoint::layers::<Mlp>();
    assert_eq!(file.meta("model_layers"), Some(layers.as_str()));
}

/// A step of `Normed` with every kind of part: parameters, BatchNorm's statistics, Nadam's two
/// slots and carried scalar, the EMA, the step counter and the seed.
fn every_part_step(seed: u64) -> (Normed, TrainStep<Normed, keras::Nadam, 4>) {
    let model = Normed::init(Seed(seed));
    let config = Config::default().ema(Ema {
        momentum: 0.9,
        overwrite_every: 0,
    });
    let step = TrainStep::with_config(&model, keras::Nadam::default(), config);
    (model, step)
}

#[test]
fn a_checkpoint_restores_every_part_of_the_state() {
    use fusegraph::optim::OptimizerPart::{Carried, Ema, Iterations, Slot};
    use fusegraph::train::StatePart::{ModelState, Optimizer, Params, Seed as SeedPart};
    let (mut model, mut step) = every_part_step(1);
    assert_eq!(
        step.state_parts().collect::<Vec<_>>(),
        [
            Params,
            ModelState,
            Optimizer(Slot(0)),
            Optimizer(Slot(1)),
            Optimizer(Ema),
            Optimizer(Carried(0)),
            Optimizer(Iterations),
            SeedPart
        ]
    );
    common::mark_every_part(&mut model, &mut step, 1);
    let bytes = checkpoint::to_bytes(&model, &step).unwrap();
    let (mut other, mut other_step) = every_part_step(2);
    let fresh = common::state_bits(&other, &other_step);
    let marked = common::state_bits(&model, &step);
    for ((part, a), (_, b)) in marked.iter().zip(&fresh) {
        assert_ne!(a, b, "{part:?} is marked");
    }
    checkpoint::from_bytes(&bytes, &mut other, &mut other_step).unwrap();
    assert_eq!(common::state_bits(&other, &other_step), marked);
}
