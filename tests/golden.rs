//! Built-in optimizers and models against the golden trajectories of Keras 3 and PyTorch.
//!
//! Source: `tests/data/reference/` (copied unchanged from the shared reference set; TensorFlow
//! 2.21.0 / Keras 3.15.1, PyTorch 2.15.0, float32 on CPU; schema and generation in its
//! README.md). Tolerance: the reference's default, `|got - ref| <= 1e-6 + 1e-5 * |ref|` on
//! every value (numpy.isclose, as `check.py` does), for every case, with no case skipped.
//!
//! Model cases run twice: on the model the harness builds from the case's layers at run time,
//! and on a `#[fusegraph::model]` type with the case's shapes trained by `TrainStep`; the two
//! must agree bit for bit.

use fusegraph::optim::{keras, torch, Rule};
use fusegraph::prelude::*;
use fusegraph_golden::{
    compare, run_case, run_file, run_typed_case, CaseInput, CaseResult, Report,
};
use serde_json::{json, Value};

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn reference(file: &str) -> Value {
    let path = format!("{}/tests/data/reference/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Checks the comparison of one case at the reference's tolerance.
fn check_result(r: &CaseResult) -> Result<(), String> {
    if r.passed {
        Ok(())
    } else {
        Err(r.to_string())
    }
}

/// Prints one line per result of `file` and the worst use of the tolerance, and asserts that
/// all pass (known deviations at their own tolerance).
fn check_results(file: &str, results: &[CaseResult]) {
    // One block per file, so that tests running in parallel do not interleave their lines.
    let mut out = format!("{file}: |got-ref| <= {ATOL:e} + {RTOL:e}*|ref|\n");
    for r in results {
        out += &format!("{r}\n");
    }
    if let Some((ratio, id)) = results
        .iter()
        .filter_map(|r| Some((r.worst.as_ref()?.ratio, &r.id)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
    {
        out += &format!("{file}: worst tolerance ratio {ratio:.3} ({id})\n");
    }
    print!("{out}");
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| check_result(r).err())
        .collect();
    assert!(
        failed.is_empty(),
        "{file}: {} of {} cases fail:\n{}",
        failed.len(),
        results.len(),
        failed.join("\n")
    );
}

/// Runs every case of `file` and asserts that none was skipped and all pass.
fn check_file(file: &str) {
    let doc = reference(file);
    let Report { got, skipped } = run_file(&doc);
    assert!(
        skipped.is_empty(),
        "{file}: skipped cases: {:#?}",
        skipped
            .iter()
            .map(|s| format!("{}: {}", s.id, s.reason))
            .collect::<Vec<_>>()
    );
    check_results(file, &compare(&doc, &got, RTOL, ATOL));
}

/// The case `id` of `doc`.
fn case<'a>(doc: &'a Value, id: &str) -> Result<&'a Value, String> {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .ok_or_else(|| format!("{id}: no such case"))
}

#[test]
fn keras_optimizers_match() {
    check_file("optimizers_keras.json");
}

#[test]
fn torch_optimizers_match() {
    check_file("optimizers_torch.json");
}

/// The optimizers beyond element-wise rules: LAMB, LARS, Adafactor, Muon and schedule-free
/// AdamW (its `eval_params` view), from Keras, PyTorch and optax.
#[test]
fn optimizers_beyond_element_wise_rules_match() {
    check_file("optimizers_beyond.json");
}

#[test]
fn keras_models_match() {
    check_file("models_keras.json");
}

#[test]
fn torch_models_match() {
    check_file("models_torch.json");
}

#[test]
fn torch_sequence_models_match() {
    check_file("models_torch_sequence.json");
}

/// `mlp_relu_ce`: 8 -> Dense(16, relu) -> Dense(4) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct MlpReluCe {
    dense_0: Dense<8, 16, Relu>,
    dense_1: Dense<16, 4>,
}

/// `mlp_tanh_mse`: 5 -> Dense(3, tanh) -> Dense(1).
#[fusegraph::model(loss = Mse)]
pub struct MlpTanhMse {
    dense_0: Dense<5, 3, Tanh>,
    dense_1: Dense<3, 1>,
}

/// `dense1_relu_mse`: 3 -> Dense(1, relu).
#[fusegraph::model(loss = Mse)]
pub struct Dense1ReluMse {
    dense_0: Dense<3, 1, Relu>,
}

/// `conv_dense_ce`: 6x6x1 -> Conv2D(2, 3x3, valid, relu) -> Flatten -> Dense(3) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct ConvDenseCe {
    conv_0: Conv2d<6, 6, 1, 2, 3, 3, 1, Valid, Relu>,
    flatten: Flatten<32>,
    dense_0: Dense<32, 3>,
}

/// `torch.seq_conv1d.sgd_momentum`: x [10, 3] -> Conv1D(5, k 3, same, relu) -> Conv1D(4, k 3,
/// valid, relu) -> mean over time -> Dense(3) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SeqConv1d {
    conv1: Conv1d<10, 3, 5, 3, 1, Same, Relu>,
    conv2: Conv1d<10, 5, 4, 3, 1, Valid, Relu>,
    gap: MeanOverTime<8, 4>,
    fc: Dense<4, 3>,
}

/// Fails at the first number of `a` whose bits differ from `b`'s at the same place.
fn same_bits(a: &Value, b: &Value, path: &str) -> Result<(), String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Err(format!("{path}: keys {:?} vs {:?}", x.keys(), y.keys()));
            }
            for (k, v) in x {
                let w = y.get(k).ok_or_else(|| format!("{path}.{k}: missing"))?;
                same_bits(v, w, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (v, w))| same_bits(v, w, &format!("{path}[{i}]"))),
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if x.to_bits() == y.to_bits() {
                Ok(())
            } else {
                Err(format!("{path}: {x:e} vs {y:e}"))
            }
        }
        _ if a == b => Ok(()),
        _ => Err(format!("{path}: {a} vs {b}")),
    }
}

/// Runs case `id` of `doc` on `model` with rule `R` and batches of up to `B`, and checks that
/// it gives the same bits as the model built from the case's layers and matches the reference
/// (as [`check_result`]).
fn typed<M, R, const B: usize>(doc: &Value, id: &str, model: M) -> Result<(), String>
where
    M: Model,
    M::Input: CaseInput,
    M::Loss: 'static,
    R: Rule + 'static,
{
    let case = case(doc, id)?;
    let typed = run_typed_case::<M, R, B>(case, model).map_err(|e| format!("{id}: {e}"))?;
    let dynamic = run_case(case).map_err(|e| format!("{id}: {e}"))?;
    same_bits(&typed, &dynamic, id)
        .map_err(|e| format!("typed and dynamic models differ at {e}"))?;
    let got = json!({"cases": [{"id": id, "got": typed}]});
    let r = compare(&json!({ "cases": [case] }), &got, RTOL, ATOL).remove(0);
    println!("{r}");
    check_result(&r)
}

#[test]
fn typed_models_match_the_reference_and_the_dynamic_models_bit_for_bit() {
    let (k, t) = (
        reference("models_keras.json"),
        reference("models_torch.json"),
    );
    let runs = [
        (
            "keras.mlp_relu_ce.sgd_momentum",
            typed::<MlpReluCe, keras::SgdMomentum, 8>(
                &k,
                "keras.mlp_relu_ce.sgd_momentum",
                MlpReluCe::init(Seed(0)),
            ),
        ),
        (
            "keras.mlp_relu_ce.adam",
            typed::<MlpReluCe, keras::Adam, 8>(
                &k,
                "keras.mlp_relu_ce.adam",
                MlpReluCe::init(Seed(0)),
            ),
        ),
        (
            "keras.mlp_tanh_mse.sgd_momentum",
            typed::<MlpTanhMse, keras::SgdMomentum, 6>(
                &k,
                "keras.mlp_tanh_mse.sgd_momentum",
                MlpTanhMse::init(Seed(0)),
            ),
        ),
        (
            "keras.dense1_relu_mse.adam_input_grad",
            typed::<Dense1ReluMse, keras::Adam, 1>(
                &k,
                "keras.dense1_relu_mse.adam_input_grad",
                Dense1ReluMse::init(Seed(0)),
            ),
        ),
        (
            "keras.conv_dense_ce.adam",
            typed::<ConvDenseCe, keras::Adam, 4>(
                &k,
                "keras.conv_dense_ce.adam",
                ConvDenseCe::init(Seed(0)),
            ),
        ),
        (
            "torch.mlp_relu_ce.adam",
            typed::<MlpReluCe, torch::Adam, 8>(
                &t,
                "torch.mlp_relu_ce.adam",
                MlpReluCe::init(Seed(0)),
            ),
        ),
        (
            "torch.mlp_tanh_mse.sgd_momentum",
            typed::<MlpTanhMse, torch::SgdMomentum, 6>(
                &t,
                "torch.mlp_tanh_mse.sgd_momentum",
                MlpTanhMse::init(Seed(0)),
            ),
        ),
    ];
    let mut shipped: Vec<&str> = [&k, &t]
        .iter()
        .flat_map(|d| d["cases"].as_array().unwrap())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let mut ran: Vec<&str> = runs.iter().map(|r| r.0).collect();
    shipped.sort_unstable();
    ran.sort_unstable();
    assert_eq!(ran, shipped, "every shipped model case has its typed model");
    let failed: Vec<&String> = runs.iter().filter_map(|r| r.1.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// `seq_gru_last`: x [6, 3] -> GRU(3 -> 5), last hidden state -> Dense(5 -> 2).
#[fusegraph::model(loss = Mse)]
pub struct GruLast {
    gru: Gru<6, 3, 5>,
    fc: Dense<5, 2>,
}

/// `seq_lstm_last`: x [7, 4] -> LSTM(4 -> 6), last hidden state -> Dense(6 -> 3) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct LstmLast {
    lstm: Lstm<7, 4, 6>,
    fc: Dense<6, 3>,
}

/// `seq_gru2_tagger`: x [6, 3] -> GRU(3 -> 4, 2 layers), every hidden state -> Dense(4 -> 3)
/// at every position.
#[fusegraph::model(loss = SequenceCrossEntropy<3>)]
pub struct Gru2Tagger {
    gru: Gru<6, 3, 4, 2, Sequence>,
    fc: PerPosition<Dense<4, 3>, 6>,
}

/// `seq_embed_bag`: tokens [7] -> Embedding(12, 6) -> mean over positions -> Dense(6 -> 3).
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
pub struct EmbedBag {
    embed: Embedding<12, 6, 7>,
    pool: MeanOverTime<7, 6>,
    fc: Dense<6, 3>,
}

/// `seq_transformer_lm`: tokens [6] -> token and position embeddings (width 8) -> a pre-LN
/// block (causal self-attention with 2 heads, no key bias; GELU MLP 8 -> 32 -> 8) -> LayerNorm
/// -> Dense(8 -> 16) at every position.
#[fusegraph::model(loss = SequenceCrossEntropy<16>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(ln1(e)) + e,
    m = fc2(fc1(ln2(a))) + a,
    logits = head(ln_f(m))
))]
pub struct TransformerLm {
    tok: Embedding<16, 8, 6>,
    pos: PositionalEmbedding<6, 8, 6>,
    ln1: PerPosition<LayerNorm<8>, 6>,
    attn: CausalSelfAttention<6, 8, 2, true, false, true, true>,
    ln2: PerPosition<LayerNorm<8>, 6>,
    fc1: PerPosition<Dense<8, 32, Gelu>, 6>,
    fc2: PerPosition<Dense<32, 8>, 6>,
    ln_f: PerPosition<LayerNorm<8>, 6>,
    head: PerPosition<Dense<8, 16>, 6>,
}

#[test]
fn typed_sequence_models_match_the_reference_and_the_dynamic_models_bit_for_bit() {
    let doc = reference("models_torch_sequence.json");
    let runs = [
        (
            "torch.seq_embed_bag.adam",
            typed::<EmbedBag, torch::Adam, 4>(
                &doc,
                "torch.seq_embed_bag.adam",
                EmbedBag::init(Seed(0)),
            ),
        ),
        (
            "torch.seq_conv1d.sgd_momentum",
            typed::<SeqConv1d, torch::SgdMomentum, 4>(
                &doc,
                "torch.seq_conv1d.sgd_momentum",
                SeqConv1d::init(Seed(0)),
            ),
        ),
        (
            "torch.seq_gru_last.adam",
            typed::<GruLast, torch::Adam, 8>(
                &doc,
                "torch.seq_gru_last.adam",
                GruLast::init(Seed(0)),
            ),
        ),
        (
            "torch.seq_lstm_last.adam_clip",
            typed::<LstmLast, torch::Adam, 8>(
                &doc,
                "torch.seq_lstm_last.adam_clip",
                LstmLast::init(Seed(0)),
            ),
        ),
        (
            "torch.seq_transformer_lm.adamw",
            typed::<TransformerLm, torch::AdamW, 3>(
                &doc,
                "torch.seq_transformer_lm.adamw",
                TransformerLm::init(Seed(0)),
            ),
        ),
        (
            "torch.seq_gru2_tagger.rmsprop",
            typed::<Gru2Tagger, torch::RmsProp, 3>(
                &doc,
                "torch.seq_gru2_tagger.rmsprop",
                Gru2Tagger::init(Seed(0)),
            ),
        ),
    ];
    let mut shipped: Vec<&str> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let mut ran: Vec<&str> = runs.iter().map(|r| r.0).collect();
    shipped.sort_unstable();
    ran.sort_unstable();
    assert_eq!(
        ran, shipped,
        "every shipped sequence case has its typed model"
    );
    let failed: Vec<&String> = runs.iter().filter_map(|r| r.1.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The cases of `models_torch_sequence2.json` without a recurrent layer, in the file's order:
/// the variable-length ones (a causal LM with a key padding mask and ignored targets, a bag
/// of embeddings over the valid tokens) and those with frozen tensors (PyTorch's
/// `requires_grad=False`). Its recurrent cases are [`RECURRENT_CASES`].
const SEQUENCE2_CASES: [&str; 4] = [
    "torch.seq2_lm_padmask.adamw",
    "torch.seq2_embed_bag_len.adam",
    "torch.frozen_mlp_backbone.sgd_momentum_wd_clip",
    "torch.frozen_cnn_bitfit.adam",
];

#[test]
fn torch_sequence2_models_match() {
    let file = "models_torch_sequence2.json";
    check_file(file);
    let doc = reference(file);
    let mut shipped: Vec<&str> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let mut typed: Vec<&str> = SEQUENCE2_CASES.into_iter().chain(RECURRENT_CASES).collect();
    shipped.sort_unstable();
    typed.sort_unstable();
    assert_eq!(typed, shipped, "every shipped case has its typed model");
}

/// `torch.frozen_mlp_backbone.sgd_momentum_wd_clip`: 6 -> Dense(10, tanh) -> Dense(8, relu)
/// -> Dense(3) logits; the first two layers frozen.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct FrozenMlpBackbone {
    #[frozen]
    dense_0: Dense<6, 10, Tanh>,
    #[frozen]
    dense_1: Dense<10, 8, Relu>,
    dense_2: Dense<8, 3>,
}

/// `torch.frozen_cnn_bitfit.adam`: 7x7x2 -> Conv2D(3, 3x3, valid, relu) -> Conv2D(4, 3x3,
/// valid, relu) -> Flatten -> Dense(3) logits; only the biases train (BitFit).
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct FrozenCnnBitfit {
    #[frozen(weight)]
    conv_0: Conv2d<7, 7, 2, 3, 3, 3, 1, Valid, Relu>,
    #[frozen(weight)]
    conv_1: Conv2d<5, 5, 3, 4, 3, 3, 1, Valid, Relu>,
    flatten: Flatten<36>,
    #[frozen(weight)]
    dense_0: Dense<36, 3>,
}

#[test]
fn typed_frozen_models_match_the_reference_and_the_dynamic_models_bit_for_bit() {
    let doc = reference("models_torch_sequence2.json");
    let [_, _, mlp, cnn] = SEQUENCE2_CASES;
    let runs = [
        typed::<FrozenMlpBackbone, torch::SgdMomentum, 6>(
            &doc,
            mlp,
            FrozenMlpBackbone::init(Seed(0)),
        ),
        typed::<FrozenCnnBitfit, torch::Adam, 4>(&doc, cnn, FrozenCnnBitfit::init(Seed(0))),
    ];
    let failed: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// `torch.seq2_lm_padmask.adamw`: the block of `TransformerLm` over tokens [7] of a vocabulary
/// of 14, the attention masking each sample's padded keys (its lengths).
#[fusegraph::model(loss = SequenceCrossEntropy<14>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(ln1(e)) + e,
    m = fc2(fc1(ln2(a))) + a,
    logits = head(ln_f(m))
))]
pub struct PaddedLm {
    tok: Embedding<14, 8, 7>,
    pos: PositionalEmbedding<7, 8, 7>,
    ln1: PerPosition<LayerNorm<8>, 7>,
    attn: CausalSelfAttention<7, 8, 2, true, false, true, true>,
    ln2: PerPosition<LayerNorm<8>, 7>,
    fc1: PerPosition<Dense<8, 32, Gelu>, 7>,
    fc2: PerPosition<Dense<32, 8>, 7>,
    ln_f: PerPosition<LayerNorm<8>, 7>,
    head: PerPosition<Dense<8, 14>, 7>,
}

/// `torch.seq2_embed_bag_len.adam`: tokens [7] -> Embedding(12, 6) -> the mean over each
/// sample's valid tokens (EmbeddingBag(mode='mean')) -> Dense(6 -> 3).
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
pub struct EmbedBagOfLengths {
    embed: Embedding<12, 6, 7>,
    pool: MeanOverTime<7, 6>,
    fc: Dense<6, 3>,
}

#[test]
fn typed_padded_models_match_the_reference_and_the_dynamic_models_bit_for_bit() {
    let doc = reference("models_torch_sequence2.json");
    let [lm, bag, ..] = SEQUENCE2_CASES;
    assert_eq!((PaddedLm::STEPS, EmbedBagOfLengths::STEPS), (7, 7));
    let runs = [
        typed::<PaddedLm, torch::AdamW, 3>(&doc, lm, PaddedLm::init(Seed(0))),
        typed::<EmbedBagOfLengths, torch::Adam, 4>(&doc, bag, EmbedBagOfLengths::init(Seed(0))),
    ];
    let failed: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn a_typed_model_that_freezes_other_tensors_is_refused() {
    let doc = reference("models_torch_sequence2.json");
    let mut case = case(&doc, SEQUENCE2_CASES[3]).unwrap().clone();
    // The case trains the last kernel, which the model freezes.
    case["model"]["frozen_weights"] = json!(["conv_0.kernel", "conv_1.kernel"]);
    case["model"]["trainable_weights"] = json!([
        "conv_0.bias",
        "conv_1.bias",
        "dense_0.kernel",
        "dense_0.bias"
    ]);
    let e =
        run_typed_case::<FrozenCnnBitfit, torch::Adam, 4>(&case, FrozenCnnBitfit::init(Seed(0)))
            .unwrap_err();
    assert!(
        e.contains("`dense_0.kernel`") && e.contains("`dense_0.weight`"),
        "{e}"
    );
    assert!(!e.contains("conv_0"), "{e}");
}

#[test]
fn a_typed_model_of_other_shapes_or_another_rule_is_refused() {
    let doc = reference("models_keras.json");
    let case = &doc["cases"][0];
    let e = run_typed_case::<MlpTanhMse, keras::SgdMomentum, 8>(case, MlpTanhMse::init(Seed(0)))
        .unwrap_err();
    assert!(e.contains("tensors"), "{e}");
    let e =
        run_typed_case::<MlpReluCe, keras::Adam, 8>(case, MlpReluCe::init(Seed(0))).unwrap_err();
    assert!(e.contains("SgdMomentum") && e.contains("Adam"), "{e}");
    let e = run_typed_case::<MlpReluCe, keras::SgdMomentum, 4>(case, MlpReluCe::init(Seed(0)))
        .unwrap_err();
    assert!(e.contains("batches of 8"), "{e}");
}

/// The reference's own `expected` objects as a `got` document: a comparison that must pass
/// exactly, so the tests below see only the change they make.
fn expected_as_got(doc: &Value) -> Value {
    let cases: Vec<Value> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"id": c["id"], "got": c["expected"]}))
        .collect();
    json!({ "cases": cases })
}

/// The first value of magnitude at least 0.1 under `v`, mutably.
fn first_large(v: &mut Value) -> Option<&mut Value> {
    match v {
        Value::Object(m) => m.values_mut().find_map(first_large),
        Value::Array(a) => a.iter_mut().find_map(first_large),
        Value::Number(n) => (n.as_f64()?.abs() >= 0.1).then_some(v),
        _ => None,
    }
}

#[test]
fn comparison_passes_the_reference_itself() {
    for file in [
        "optimizers_keras.json",
        "optimizers_torch.json",
        "models_keras.json",
        "models_torch.json",
        "models_torch_sequence.json",
        "models_torch_sequence2.json",
    ] {
        let doc = reference(file);
        for r in compare(&doc, &expected_as_got(&doc), RTOL, ATOL) {
            assert!(r.passed && r.max_abs == 0.0 && r.values > 0, "{r}");
        }
    }
}

#[test]
fn comparison_fails_on_a_value_off_by_1e4_relative() {
    let doc = reference("optimizers_keras.json");
    let mut got = expected_as_got(&doc);
    let id = got["cases"][1]["id"].clone();
    let params = &mut got["cases"][1]["got"]["steps"][3]["params"];
    let x = first_large(params).expect("a parameter of magnitude >= 0.1");
    *x = Value::from(x.as_f64().unwrap() * (1.0 + 1e-4));
    let results = compare(&doc, &got, RTOL, ATOL);
    for r in &results {
        if r.id == id {
            assert!(!r.passed && r.bad == 1, "{r}");
            let w = r.worst.as_ref().unwrap();
            assert!(w.path.starts_with("steps[3].params."), "{r}");
            assert!(w.ratio > 5.0, "{r}");
        } else {
            assert!(r.passed, "{r}");
        }
    }
}

#[test]
fn comparison_fails_on_a_missing_value() {
    let doc = reference("optimizers_torch.json");
    let mut got = expected_as_got(&doc);
    let case = got["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["id"] == "torch.adam.plain")
        .unwrap();
    let state = case["got"]["steps"][2]["state"].as_object_mut().unwrap();
    assert!(state.remove("exp_avg_sq").is_some());
    let results = compare(&doc, &got, RTOL, ATOL);
    let r = results.iter().find(|r| r.id == "torch.adam.plain").unwrap();
    assert!(!r.passed, "{r}");
    assert_eq!(r.missing.len(), 1, "{r}");
    assert!(r.missing[0].starts_with("steps[2].state.exp_avg_sq"), "{r}");
    assert!(results
        .iter()
        .filter(|r| r.id != "torch.adam.plain")
        .all(|r| r.passed));
}

/// `seq2_gru_packed_last`: x [7, 3] packed on its lengths -> GRU(3 -> 5), the state after each
/// sample's last step -> Dense(5 -> 3) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct GruPackedLast {
    gru: Gru<7, 3, 5>,
    fc: Dense<5, 3>,
}

/// `seq2_lstm_packed_last`: x [6, 4] packed -> LSTM(4 -> 5), last state -> Dense(5 -> 2).
#[fusegraph::model(loss = Mse)]
pub struct LstmPackedLast {
    lstm: Lstm<6, 4, 5>,
    fc: Dense<5, 2>,
}

/// `seq2_gru2_packed_tagger`: x [6, 3] packed -> GRU(3 -> 4, 2 layers), every step (0 at padded
/// ones) -> Dense(4 -> 3) at every position; padded targets ignored.
#[fusegraph::model(loss = SequenceCrossEntropy<3>)]
pub struct Gru2PackedTagger {
    gru: Gru<6, 3, 4, 2, Sequence>,
    fc: PerPosition<Dense<4, 3>, 6>,
}

/// `seq2_bigru_last`: x [6, 3] -> bidirectional GRU(3 -> 4), both last states -> Dense(8 -> 3).
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct BiGruLast {
    gru: BiGru<6, 3, 4>,
    fc: Dense<8, 3>,
}

/// `seq2_bilstm2_tagger`: x [5, 3] -> bidirectional LSTM(3 -> 3, 2 layers), every step [5, 6]
/// -> Dense(6 -> 3) at every position.
#[fusegraph::model(loss = SequenceCrossEntropy<3>)]
pub struct BiLstm2Tagger {
    lstm: BiLstm<5, 3, 3, 2, Sequence>,
    fc: PerPosition<Dense<6, 3>, 5>,
}

/// `seq2_bilstm_packed_last`: x [7, 3] packed -> bidirectional LSTM(3 -> 4), both last states
/// -> Dense(8 -> 3) logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct BiLstmPackedLast {
    lstm: BiLstm<7, 3, 4>,
    fc: Dense<8, 3>,
}

/// The recurrent cases of `models_torch_sequence2.json`: packed on their lengths, in both
/// directions, or both.
const RECURRENT_CASES: [&str; 6] = [
    "torch.seq2_gru_packed_last.adam",
    "torch.seq2_lstm_packed_last.sgd_momentum",
    "torch.seq2_gru2_packed_tagger.adam",
    "torch.seq2_bigru_last.adam",
    "torch.seq2_bilstm2_tagger.adam",
    "torch.seq2_bilstm_packed_last.adam_clip",
];

#[test]
fn typed_recurrent_models_with_lengths_and_both_directions_match_bit_for_bit() {
    let doc = reference("models_torch_sequence2.json");
    let [gru, lstm, tagger, bigru, bilstm2, bilstm] = RECURRENT_CASES;
    let runs = [
        typed::<GruPackedLast, torch::Adam, 5>(&doc, gru, GruPackedLast::init(Seed(0))),
        typed::<LstmPackedLast, torch::SgdMomentum, 4>(&doc, lstm, LstmPackedLast::init(Seed(0))),
        typed::<Gru2PackedTagger, torch::Adam, 4>(&doc, tagger, Gru2PackedTagger::init(Seed(0))),
        typed::<BiGruLast, torch::Adam, 4>(&doc, bigru, BiGruLast::init(Seed(0))),
        typed::<BiLstm2Tagger, torch::Adam, 3>(&doc, bilstm2, BiLstm2Tagger::init(Seed(0))),
        typed::<BiLstmPackedLast, torch::Adam, 5>(&doc, bilstm, BiLstmPackedLast::init(Seed(0))),
    ];
    let failed: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
