//! Importing a PyTorch `state_dict` saved with `safetensors.torch.save_file`: the files are
//! written here with the `safetensors` crate that PyTorch's `save_file` calls, without
//! metadata, tensors in PyTorch's names and layouts, as PyTorch writes them.

use super::common::{bits, Rng};
use super::{scratch, Attn, Conv, GruNet, Mlp, Normed, Seq, Tiny, GRU_NET_GRU};
use fusegraph::checkpoint::{self, CheckpointError, TorchImport, Warning};
use fusegraph::fit::TrainError;
use fusegraph::optim::keras;
use fusegraph::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

/// An LSTM, then a classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct LstmNet {
    lstm: Lstm<3, 2, 3>,
    fc: Dense<3, 2>,
}

/// A tensor of a PyTorch `state_dict`: its key, type, shape and little-endian bytes.
struct Tensor {
    key: String,
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn f32s(key: &str, shape: &[usize], values: &[f32]) -> Tensor {
    assert_eq!(shape.iter().product::<usize>(), values.len(), "{key}");
    Tensor {
        key: key.into(),
        dtype: Dtype::F32,
        shape: shape.to_vec(),
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// A BatchNorm's `num_batches_tracked`, an I64 scalar.
fn counter(key: &str, batches: i64) -> Tensor {
    Tensor {
        key: key.into(),
        dtype: Dtype::I64,
        shape: vec![],
        data: batches.to_le_bytes().to_vec(),
    }
}

/// What `safetensors.torch.save_file(state_dict, path)` writes: no metadata.
fn save_file(tensors: &[Tensor]) -> Vec<u8> {
    let views = tensors.iter().map(|t| {
        let view = TensorView::new(t.dtype, t.shape.clone(), &t.data).unwrap();
        (t.key.clone(), view)
    });
    safetensors::serialize(views, None).unwrap()
}

/// A `state_dict` of random values, each key with its shape in PyTorch's layout (and
/// `num_batches_tracked` for the keys that end with it).
fn state_dict(seed: u64, keys: &[(&str, &[usize])]) -> Vec<Tensor> {
    let mut rng = Rng::new(seed);
    keys.iter()
        .map(|&(key, shape)| match key.ends_with("num_batches_tracked") {
            true => counter(key, 17),
            false => f32s(key, shape, &rng.vec(shape.iter().product(), 1.0)),
        })
        .collect()
}

/// The `f32` values of a tensor of the file.
fn values(t: &Tensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn find<'a>(tensors: &'a [Tensor], key: &str) -> Vec<f32> {
    values(tensors.iter().find(|t| t.key == key).unwrap())
}

/// Imports `tensors` into a fresh `M` with `import`, strictly by default.
fn import<M: Init>(import: &TorchImport, tensors: &[Tensor], seed: u64) -> M {
    let mut model = M::init(Seed(seed));
    import.from_bytes(&save_file(tensors), &mut model).unwrap();
    model
}

/// The model a fresh import starts from.
pub trait Init: Model {
    /// The model `init` makes from `seed`.
    fn init(seed: Seed) -> Self;
}

macro_rules! init {
    ($($m:ident),*) => {$(
        impl Init for $m {
            fn init(seed: Seed) -> Self {
                $m::init(seed)
            }
        }
    )*};
}
init!(Tiny, Mlp, Normed, Conv, Seq, GruNet, LstmNet, Attn);

/// The error of importing `bytes` into `model` with `import`, after checking that the model
/// did not change.
fn refused<M: Model>(import: &TorchImport, bytes: &[u8], model: &mut M) -> CheckpointError {
    let (params, state) = (bits(model.params()), bits(model.state()));
    let err = import.from_bytes(bytes, model).unwrap_err();
    assert_eq!(bits(model.params()), params, "changed by a failed import");
    assert_eq!(bits(model.state()), state, "changed by a failed import");
    err
}

/// The keys of a `state_dict` of `Mlp`'s module, under `prefix`.
fn mlp_keys(prefix: &str) -> Vec<(String, Vec<usize>)> {
    [
        ("fc1.weight", vec![16, 8]),
        ("fc1.bias", vec![16]),
        ("fc2.weight", vec![4, 16]),
        ("fc2.bias", vec![4]),
    ]
    .into_iter()
    .map(|(k, s)| (format!("{prefix}{k}"), s))
    .collect()
}

fn mlp_dict(seed: u64, prefix: &str, extra: &[(&str, &[usize])]) -> Vec<Tensor> {
    let keys = mlp_keys(prefix);
    let mut all: Vec<(&str, &[usize])> = keys.iter().map(|(k, s)| (k.as_str(), &s[..])).collect();
    all.extend_from_slice(extra);
    state_dict(seed, &all)
}

/// The weight `[[1, 2, 3], [4, 5, 6]]` of an `nn.Linear(3, 2)`: row `o`, column `i`.
const LINEAR: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// [`LINEAR`] as `Dense<3, 2>` stores it, `[in = 3, out = 2]`: (i, o) at `2 * i + o` holds
/// PyTorch's `[o][i]`.
const LINEAR_STORED: [f32; 6] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];

#[test]
fn a_linear_weight_lands_transposed() {
    // nn.Linear(3, 2) with weight [[1, 2, 3], [4, 5, 6]] (row o, column i) and bias [7, 8].
    let file = [
        f32s("fc.weight", &[2, 3], &LINEAR),
        f32s("fc.bias", &[2], &[7.0, 8.0]),
    ];
    let mut model = Tiny::init(Seed(1));
    let report = TorchImport::new()
        .from_bytes(&save_file(&file), &mut model)
        .unwrap();
    assert_eq!(model.fc().weight(), LINEAR_STORED);
    assert_eq!(model.fc().bias(), [7.0, 8.0]);
    let loaded: Vec<(&str, &str, &str)> = report
        .loaded()
        .iter()
        .map(|l| (l.key.as_str(), l.tensor.as_str(), l.dtype.as_str()))
        .collect();
    assert_eq!(
        loaded,
        [
            ("fc.bias", "fc.bias", "F32"),
            ("fc.weight", "fc.weight", "F32")
        ]
    );
    assert!(report.unused().is_empty() && report.unset().is_empty());
    assert_eq!(
        report.to_string(),
        "2 tensors loaded: `fc.bias`, `fc.weight`"
    );
}

#[test]
fn a_conv2d_weight_goes_from_oihw_to_hwio_and_batchnorm_state_is_restored() {
    let keys: [(&str, &[usize]); 9] = [
        ("conv.weight", &[3, 2, 3, 3]),
        ("conv.bias", &[3]),
        ("bn.weight", &[3]),
        ("bn.bias", &[3]),
        ("bn.running_mean", &[3]),
        ("bn.running_var", &[3]),
        ("bn.num_batches_tracked", &[]),
        ("fc.weight", &[4, 27]),
        ("fc.bias", &[4]),
    ];
    let file = state_dict(2, &keys);
    let mut model = Conv::init(Seed(1));
    let report = TorchImport::new()
        .from_bytes(&save_file(&file), &mut model)
        .unwrap();
    assert_eq!(report.ignored(), ["bn.num_batches_tracked"]);
    assert_eq!(report.loaded().len(), 8);
    let torch = find(&file, "conv.weight"); // [F = 3, C = 2, KH = 3, KW = 3]
    let w = model.conv().weight(); // [KH, KW, C, F]
    for o in 0..3 {
        for c in 0..2 {
            for h in 0..3 {
                for x in 0..3 {
                    let t = torch[((o * 2 + c) * 3 + h) * 3 + x];
                    assert_eq!(w[((h * 3 + x) * 2 + c) * 3 + o].to_bits(), t.to_bits());
                }
            }
        }
    }
    let bn = model.bn();
    assert_affine(bn.tensor("gamma"), bn.tensor("beta"), &file, "bn");
    assert_eq!(bits(model.state()), bits(&running_stats(&file, "bn")));
    let fc = transposed(&find(&file, "fc.weight"), 4, 27);
    assert_eq!(bits(model.fc().weight()), bits(&fc));
}

/// Checks that a norm's `gamma` and `beta` hold the file's `<layer>.weight` and
/// `<layer>.bias`.
fn assert_affine(gamma: Option<&[f32]>, beta: Option<&[f32]>, file: &[Tensor], layer: &str) {
    let weight = find(file, &format!("{layer}.weight"));
    assert_eq!(bits(gamma.unwrap()), bits(&weight), "{layer}.weight");
    let bias = find(file, &format!("{layer}.bias"));
    assert_eq!(bits(beta.unwrap()), bits(&bias), "{layer}.bias");
}

/// The running mean and variance of BatchNorm `layer` in the file, as the model's state
/// holds them.
fn running_stats(file: &[Tensor], layer: &str) -> Vec<f32> {
    let mean = find(file, &format!("{layer}.running_mean"));
    [mean, find(file, &format!("{layer}.running_var"))].concat()
}

/// A Linear weight `[out, in]` of PyTorch as fusegraph stores it, `[in, out]`.
fn transposed(torch: &[f32], out: usize, inputs: usize) -> Vec<f32> {
    (0..inputs * out)
        .map(|n| torch[(n % out) * inputs + n / out])
        .collect()
}

#[test]
fn a_conv1d_weight_goes_from_out_in_k_and_a_per_position_dense_is_a_linear() {
    let keys: [(&str, &[usize]); 4] = [
        ("conv.weight", &[3, 2, 3]),
        ("conv.bias", &[3]),
        ("proj.weight", &[4, 3]),
        ("proj.bias", &[4]),
    ];
    let file = state_dict(3, &keys);
    let model: Seq = import(&TorchImport::new(), &file, 1);
    let torch = find(&file, "conv.weight"); // [C_OUT = 3, C_IN = 2, K = 3]
    let w = model.conv().weight(); // [K, C_IN, C_OUT]
    for o in 0..3 {
        for c in 0..2 {
            for j in 0..3 {
                let t = torch[(o * 2 + c) * 3 + j];
                assert_eq!(w[(j * 2 + c) * 3 + o].to_bits(), t.to_bits());
            }
        }
    }
    let proj = transposed(&find(&file, "proj.weight"), 4, 3);
    assert_eq!(bits(model.proj().weight()), bits(&proj));
    assert_eq!(bits(model.conv().bias()), bits(&find(&file, "conv.bias")));
}

#[test]
fn norms_load_with_pytorch_names_and_the_counter_may_be_absent() {
    let mut keys: Vec<(&str, &[usize])> = vec![
        ("fc1.weight", &[16, 8]),
        ("fc1.bias", &[16]),
        ("bn.weight", &[16]),
        ("bn.bias", &[16]),
        ("bn.running_mean", &[16]),
        ("bn.running_var", &[16]),
        ("bn.num_batches_tracked", &[]),
        ("ln.weight", &[16]),
        ("ln.bias", &[16]),
        ("head.weight", &[4, 16]),
        ("head.bias", &[4]),
    ];
    let file = state_dict(4, &keys);
    let model: Normed = import(&TorchImport::new(), &file, 1);
    let (ln, bn) = (model.ln(), model.bn());
    assert_affine(ln.tensor("gamma"), ln.tensor("beta"), &file, "ln");
    assert_affine(bn.tensor("gamma"), bn.tensor("beta"), &file, "bn");
    assert_eq!(bits(model.state()), bits(&running_stats(&file, "bn")));
    // Without the counter (a BatchNorm with momentum but an old PyTorch): the same.
    keys.retain(|(k, _)| !k.ends_with("num_batches_tracked"));
    let again: Normed = import(&TorchImport::new(), &state_dict(4, &keys), 1);
    assert_eq!(bits(again.params()), bits(model.params()));
    assert_eq!(bits(again.state()), bits(model.state()));
}

/// Imports a `state_dict` of `keys` into an `M` whose parameters start with the first
/// `recurrent` of them, and checks that they are there as they are, in the model's order.
fn recurrent_as_they_are<M: Init>(seed: u64, keys: &[(&str, &[usize])], recurrent: usize) {
    let file = state_dict(seed, keys);
    let model: M = import(&TorchImport::new(), &file, 1);
    let expected: Vec<f32> = keys[..recurrent]
        .iter()
        .flat_map(|(k, _)| find(&file, k))
        .collect();
    assert_eq!(bits(&model.params()[..expected.len()]), bits(&expected));
}

#[test]
fn recurrent_weights_load_as_they_are() {
    let gru_net = [
        &GRU_NET_GRU[..],
        &[("fc.weight", &[4, 4]), ("fc.bias", &[4])],
    ]
    .concat();
    recurrent_as_they_are::<GruNet>(5, &gru_net, GRU_NET_GRU.len());
    recurrent_as_they_are::<LstmNet>(
        6,
        &[
            ("lstm.weight_ih_l0", &[12, 2]),
            ("lstm.weight_hh_l0", &[12, 3]),
            ("lstm.bias_ih_l0", &[12]),
            ("lstm.bias_hh_l0", &[12]),
            ("fc.weight", &[2, 3]),
            ("fc.bias", &[2]),
        ],
        4,
    );
}

#[test]
fn embeddings_load_as_they_are_and_attention_projections_as_linears() {
    let keys: [(&str, &[usize]); 10] = [
        ("tok.weight", &[5, 4]),
        ("attn.q.weight", &[4, 4]),
        ("attn.q.bias", &[4]),
        ("attn.k.weight", &[4, 4]),
        ("attn.v.weight", &[4, 4]),
        ("attn.v.bias", &[4]),
        ("attn.o.weight", &[4, 4]),
        ("attn.o.bias", &[4]),
        ("head.weight", &[5, 4]),
        ("head.bias", &[5]),
    ];
    let file = state_dict(7, &keys);
    let model: Attn = import(&TorchImport::new(), &file, 1);
    assert_eq!(bits(model.tok().weight()), bits(&find(&file, "tok.weight")));
    for (key, stored) in [("attn.q.weight", "q_weight"), ("attn.o.weight", "o_weight")] {
        let w = transposed(&find(&file, key), 4, 4);
        let attn = model.attn();
        assert_eq!(bits(attn.tensor(stored).unwrap()), bits(&w), "{key}");
    }
    assert_eq!(
        bits(model.attn().tensor("o_bias").unwrap()),
        bits(&find(&file, "attn.o.bias"))
    );
}

/// Every model above, saved by `save_model` (PyTorch's names and layouts, and metadata that
/// the import does not read) and imported into a fresh one: the same bits.
#[test]
fn save_model_then_import_gives_the_same_bits() {
    fn round_trip<M: Init>(trained: &M) {
        let bytes = checkpoint::model_to_bytes(trained).unwrap();
        let mut fresh = M::init(Seed(99));
        let report = TorchImport::new().from_bytes(&bytes, &mut fresh).unwrap();
        assert_eq!(bits(fresh.params()), bits(trained.params()));
        assert_eq!(bits(fresh.state()), bits(trained.state()));
        assert_eq!(
            report.loaded().len(),
            M::TENSORS.len() + M::STATE_TENSORS.len()
        );
        assert_eq!(report.ignored().len(), M::BATCH_COUNTERS.len());
    }
    let mut normed = Normed::init(Seed(1));
    let mut step = TrainStep::<Normed, keras::Adam, 4>::new(&normed, keras::Adam::default());
    let mut rng = Rng::new(8);
    step.run(&mut normed, &rng.vec(4 * Normed::IN, 1.0), &[0, 1, 2, 3]);
    assert!(normed.state().iter().any(|&s| s != 0.0 && s != 1.0));
    round_trip(&normed);
    round_trip(&Conv::init(Seed(2)));
    round_trip(&Seq::init(Seed(3)));
    round_trip(&GruNet::init(Seed(4)));
    round_trip(&LstmNet::init(Seed(5)));
    round_trip(&Attn::init(Seed(6)));
}

#[test]
fn a_prefix_and_renames_map_the_keys_of_a_wrapper() {
    // A classifier holding the Mlp as `backbone`, with a head of its own.
    let file = mlp_dict(
        9,
        "backbone.",
        &[("head.weight", &[2, 4]), ("head.bias", &[2])],
    );
    let bytes = save_file(&file);
    let mut model = Mlp::init(Seed(1));
    let err = refused(&TorchImport::new().prefix("backbone."), &bytes, &mut model);
    assert!(
        matches!(&err, CheckpointError::Unmatched { unused, unset } if unused.len() == 2 && unset.is_empty()),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the PyTorch file does not match the model: its keys `head.bias`, `head.weight` map to \
         no tensor of the model (map them with `TorchImport::rename`, or allow them with \
         `allow_unused`)"
    );
    let report = TorchImport::new()
        .prefix("backbone.")
        .allow_unused()
        .from_bytes(&bytes, &mut model)
        .unwrap();
    assert_eq!(report.unused(), ["head.bias", "head.weight"]);
    let w = find(&file, "backbone.fc2.weight"); // [4, 16]
    assert_eq!(
        model.fc2().weight()[16 + 3].to_bits(),
        w[3 * 16 + 4].to_bits()
    );
    assert_eq!(
        bits(model.fc1().bias()),
        bits(&find(&file, "backbone.fc1.bias"))
    );
    assert_eq!(report.loaded()[0].key, "backbone.fc1.bias");
    assert_eq!(report.loaded()[0].tensor, "fc1.bias");
    assert!(report.to_string().starts_with(
        "4 tensors loaded: `backbone.fc1.bias` as `fc1.bias`, `backbone.fc1.weight` as `fc1.weight`"
    ));
    assert!(report
        .to_string()
        .ends_with("\nunused keys of the file: `head.bias`, `head.weight`"));

    // nn.Sequential numbering and a classifier renamed key by key.
    let file = state_dict(
        10,
        &[
            ("encoder.0.weight", &[16, 8]),
            ("encoder.0.bias", &[16]),
            ("classifier.weight", &[4, 16]),
            ("classifier.bias", &[4]),
        ],
    );
    let import = TorchImport::new()
        .rename_prefix("encoder.0.", "fc1.")
        .rename("classifier.weight", "fc2.weight")
        .rename("classifier.bias", "fc2.bias");
    let renamed: Mlp = import_as(&import, &file);
    let plain: Mlp = import_as(
        &TorchImport::new(),
        &[
            f32s("fc1.weight", &[16, 8], &find(&file, "encoder.0.weight")),
            f32s("fc1.bias", &[16], &find(&file, "encoder.0.bias")),
            f32s("fc2.weight", &[4, 16], &find(&file, "classifier.weight")),
            f32s("fc2.bias", &[4], &find(&file, "classifier.bias")),
        ],
    );
    assert_eq!(bits(renamed.params()), bits(plain.params()));
}

fn import_as<M: Init>(import: &TorchImport, tensors: &[Tensor]) -> M {
    self::import(import, tensors, 1)
}

#[test]
fn strict_by_default_and_unset_tensors_keep_their_values_when_allowed() {
    let mut file = mlp_dict(11, "", &[]);
    file.retain(|t| !t.key.starts_with("fc2."));
    let bytes = save_file(&file);
    let mut model = Mlp::init(Seed(1));
    let before = model.params().to_vec();
    let err = refused(&TorchImport::new(), &bytes, &mut model);
    assert_eq!(
        err.to_string(),
        "the PyTorch file does not match the model: the model's tensors `fc2.weight` [4, 16], \
         `fc2.bias` [4] are set by no key of the file (keep their values with \
         `TorchImport::allow_missing`)"
    );
    let report = TorchImport::new()
        .allow_missing()
        .from_bytes(&bytes, &mut model)
        .unwrap();
    assert_eq!(report.unset(), ["fc2.weight", "fc2.bias"]);
    let fc2 = 16 * 8 + 16;
    assert_eq!(bits(&model.params()[fc2..]), bits(&before[fc2..]));
    assert_ne!(bits(&model.params()[..fc2]), bits(&before[..fc2]));
    assert!(report
        .to_string()
        .ends_with("\ntensors of the model left as they were: `fc2.weight`, `fc2.bias`"));

    // Both sides at once, renamed keys with what they were read as, long lists counted.
    let file = state_dict(12, &[("net.fc1.weight", &[16, 8]), ("x", &[1])]);
    let wide: Vec<Tensor> = (0..10)
        .map(|i| f32s(&format!("k{i}"), &[1], &[0.5]))
        .collect();
    let err = refused(
        &TorchImport::new().prefix("net."),
        &save_file(&file),
        &mut model,
    );
    assert_eq!(
        err.to_string(),
        "the PyTorch file does not match the model: its keys `x` map to no tensor of the \
         model (map them with `TorchImport::rename`, or allow them with `allow_unused`); \
         the model's tensors `fc1.bias` [16], `fc2.weight` [4, 16], `fc2.bias` [4] are set by \
         no key of the file (keep their values with `TorchImport::allow_missing`)"
    );
    let err = refused(
        &TorchImport::new().rename_prefix("k", "fc9."),
        &save_file(&wide),
        &mut model,
    );
    assert!(
        err.to_string().starts_with(
            "the PyTorch file does not match the model: its keys `k0` (read as `fc9.0`), \
             `k1` (read as `fc9.1`), "
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("`k7` (read as `fc9.7`) and 2 more map to no tensor"),
        "{err}"
    );
}

#[test]
fn shapes_are_checked_in_pytorch_layout_naming_the_key_and_both_shapes() {
    let mut file = mlp_dict(13, "", &[]);
    file[0] = f32s("fc1.weight", &[8, 16], &[0.25; 128]); // transposed, as Keras would store it
    let mut model = Mlp::init(Seed(1));
    let err = refused(&TorchImport::new(), &save_file(&file), &mut model);
    assert!(
        matches!(&err, CheckpointError::ImportShape { key, tensor, file, model }
            if key == "fc1.weight" && tensor == "fc1.weight" && file == &[8, 16] && model == &[16, 8]),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`fc1.weight`: the file's shape [8, 16] is not the model's [16, 8] (PyTorch layout)"
    );
    let mut file = mlp_dict(13, "backbone.", &[]);
    file[2] = f32s("backbone.fc2.weight", &[10, 16], &[0.5; 160]);
    let import = TorchImport::new().prefix("backbone.");
    let err = refused(&import, &save_file(&file), &mut model);
    assert_eq!(
        err.to_string(),
        "`backbone.fc2.weight` (the model's `fc2.weight`): the file's shape [10, 16] is not \
         the model's [4, 16] (PyTorch layout)"
    );
}

#[test]
fn half_and_double_precision_are_converted_and_integers_refused() {
    // fc.weight [[1, 2, 3], [4, 5, 6]] as F16, fc.bias [7, 8] as BF16.
    let f16 = [0x3c00u16, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600];
    let bf16 = [0x40e0u16, 0x4100];
    let words = |w: &[u16]| w.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
    let half = [
        Tensor {
            key: "fc.weight".into(),
            dtype: Dtype::F16,
            shape: vec![2, 3],
            data: words(&f16),
        },
        Tensor {
            key: "fc.bias".into(),
            dtype: Dtype::BF16,
            shape: vec![2],
            data: words(&bf16),
        },
    ];
    let mut model = Tiny::init(Seed(1));
    let report = TorchImport::new()
        .from_bytes(&save_file(&half), &mut model)
        .unwrap();
    assert_eq!(model.fc().weight(), LINEAR_STORED);
    assert_eq!(model.fc().bias(), [7.0, 8.0]);
    assert_eq!(
        report.to_string(),
        "2 tensors loaded: `fc.bias` (from BF16), `fc.weight` (from F16)"
    );

    // F64, rounded to the nearest f32.
    let doubles = [0.1f64, 1.0 / 3.0, -2.5, 1e-3, 7.0, 1e10];
    let double = [
        Tensor {
            key: "fc.weight".into(),
            dtype: Dtype::F64,
            shape: vec![2, 3],
            data: doubles.iter().flat_map(|v| v.to_le_bytes()).collect(),
        },
        f32s("fc.bias", &[2], &[0.0, 0.0]),
    ];
    TorchImport::new()
        .from_bytes(&save_file(&double), &mut model)
        .unwrap();
    let rounded: Vec<f32> = [0, 3, 1, 4, 2, 5]
        .iter()
        .map(|&i| doubles[i] as f32)
        .collect();
    assert_eq!(bits(model.fc().weight()), bits(&rounded));

    let ints = [
        Tensor {
            key: "fc.weight".into(),
            dtype: Dtype::I64,
            shape: vec![2, 3],
            data: vec![0; 48],
        },
        f32s("fc.bias", &[2], &[0.0, 0.0]),
    ];
    let err = refused(&TorchImport::new(), &save_file(&ints), &mut model);
    assert!(
        matches!(&err, CheckpointError::ImportDtype { key, found } if key == "fc.weight" && found == "I64"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`fc.weight` holds I64 values; the import reads F32, F16, BF16 or F64: convert the \
         tensor with `.float()` before saving it"
    );
}

#[test]
fn two_keys_for_one_tensor_are_an_error() {
    let mut file = mlp_dict(14, "", &[]);
    file.push(f32s("backbone.fc1.bias", &[16], &[1.0; 16]));
    let mut model = Mlp::init(Seed(1));
    let import = TorchImport::new().prefix("backbone.");
    let err = refused(&import, &save_file(&file), &mut model);
    assert!(
        matches!(&err, CheckpointError::DuplicateMapping { tensor, first, second }
            if tensor == "fc1.bias" && first == "backbone.fc1.bias" && second == "fc1.bias"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the PyTorch file's keys `backbone.fc1.bias` and `fc1.bias` both map to the model's \
         tensor `fc1.bias`"
    );
}

#[test]
fn non_finite_values_are_refused_unless_allowed() {
    let file = [
        f32s(
            "fc.weight",
            &[2, 3],
            &[1.0, 2.0, 3.0, 4.0, f32::INFINITY, 6.0],
        ),
        f32s("fc.bias", &[2], &[f32::NAN, 0.0]),
    ];
    let bytes = save_file(&file);
    let mut model = Tiny::init(Seed(1));
    let err = refused(&TorchImport::new(), &bytes, &mut model);
    assert!(
        matches!(&err, CheckpointError::NonFinite { name, index: 0, value } if name == "fc.bias" && value.is_nan()),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("`TorchImport::new().allow_non_finite()`"));
    let report = TorchImport::new()
        .allow_non_finite()
        .from_bytes(&bytes, &mut model)
        .unwrap();
    assert_eq!(
        report.warnings(),
        [
            Warning::NonFinite {
                name: "fc.bias".into(),
                index: 0
            },
            Warning::NonFinite {
                name: "fc.weight".into(),
                index: 4
            }
        ]
    );
    assert_eq!(model.fc().weight()[3], f32::INFINITY); // PyTorch's [1][1], stored (1, 1)
    assert!(report.to_string().ends_with(
        "\nwarning: checkpoint tensor `fc.weight` holds a NaN or an infinity at index 4"
    ));
}

#[test]
fn files_that_are_not_safetensors_are_refused() {
    let mut model = Tiny::init(Seed(1));
    // The start of a zip archive (torch.save since PyTorch 1.6) and of a pickle (before).
    let zip = b"PK\x03\x04\x00\x00\x08\x08\x00\x00archive/data.pkl".to_vec();
    let err = refused(&TorchImport::new(), &zip, &mut model);
    assert!(
        matches!(err, CheckpointError::NotSafetensors { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "checkpoint is not a safetensors file but a zip archive, as `torch.save` writes; \
         write it in PyTorch with `safetensors.torch.save_file(model.state_dict(), path)`"
    );
    let pickle = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.".to_vec();
    let err = refused(&TorchImport::new(), &pickle, &mut model);
    assert!(
        err.to_string()
            .contains("but a pickle, as `torch.save` writes"),
        "{err}"
    );
    // load_model says the same of them.
    let err = checkpoint::model_from_bytes(&zip, &mut model).unwrap_err();
    assert!(
        matches!(err, CheckpointError::NotSafetensors { .. }),
        "{err:?}"
    );
    for junk in [
        &b"not a checkpoint"[..],
        b"",
        b"\x08\0\0\0\0\0\0\0{\"a\":1} ",
    ] {
        let err = refused(&TorchImport::new(), junk, &mut model);
        assert!(
            matches!(
                err,
                CheckpointError::Header { .. } | CheckpointError::Truncated { .. }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn load_model_and_resume_refuse_a_pytorch_file_and_point_at_the_import() {
    let dir = scratch("refuse");
    let path = dir.join("torch.safetensors");
    std::fs::write(&path, save_file(&mlp_dict(15, "", &[]))).unwrap();
    let pointer = "checkpoint metadata has no `format` (expected `fusegraph`; a file written by \
                   PyTorch's `safetensors.torch.save_file` loads with `checkpoint::TorchImport`)";
    let mut model = Mlp::init(Seed(1));
    let err = checkpoint::load_model(&path, &mut model).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Metadata { key, found: None, .. } if key == "format"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), pointer);
    let step = TrainStep::<Mlp, keras::Adam, 4>::new(&model, keras::Adam::default());
    let mut trainer = Trainer::new(model, step).verbose(Verbose::Silent);
    let err = trainer.resume(&path).unwrap_err();
    assert!(matches!(err, TrainError::Checkpoint(_)), "{err}");
    assert!(err.to_string().contains(pointer), "{err}");
    // The import takes it.
    let mut model = Mlp::init(Seed(1));
    TorchImport::new().load_model(&path, &mut model).unwrap();
    assert_eq!(
        bits(model.fc2().bias()),
        bits(&find(&mlp_dict(15, "", &[]), "fc2.bias"))
    );
}

/// The file `tests/data/torch/write_fixtures.py` writes with Python's `struct` and `json` only,
/// byte for byte as `safetensors.torch.save_file` writes `nn.Linear(3, 2)`'s `state_dict`
/// with weight `[[1, 2, 3], [4, 5, 6]]` and bias `[0.5, -0.25]`.
#[test]
fn a_file_written_by_python_imports() {
    let bytes = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch/tiny.safetensors"),
    )
    .unwrap();
    let same = save_file(&[
        f32s("fc.weight", &[2, 3], &LINEAR),
        f32s("fc.bias", &[2], &[0.5, -0.25]),
    ]);
    assert_eq!(
        bytes, same,
        "the crate PyTorch's save_file calls writes the same bytes"
    );
    let mut model = Tiny::init(Seed(1));
    TorchImport::new().from_bytes(&bytes, &mut model).unwrap();
    assert_eq!(model.fc().weight(), LINEAR_STORED);
    assert_eq!(model.fc().bias(), [0.5, -0.25]);
}

/// The example of `TorchImport`'s docs.
#[test]
fn docs_example() -> Result<(), CheckpointError> {
    let dir = scratch("docs");
    let path = dir.join("classifier.safetensors");
    let file = mlp_dict(
        16,
        "backbone.",
        &[("head.weight", &[2, 4]), ("head.bias", &[2])],
    );
    std::fs::write(&path, save_file(&file)).unwrap();

    let mut model = Mlp::init(Seed(0));
    let report = TorchImport::new()
        .prefix("backbone.")
        .allow_unused() // the head
        .load_model(&path, &mut model)?;
    assert_eq!(report.unused(), ["head.bias", "head.weight"]);
    println!("{report}");
    assert_eq!(
        bits(model.fc2().bias()),
        bits(&find(&file, "backbone.fc2.bias"))
    );
    Ok(())
}
