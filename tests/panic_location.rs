//! The unchecked methods of a train step (`run`, `predict`, ...) panic at the caller's line
//! with the words of the error their `try_` twin returns: the sample, the position in it and
//! the id or label as given.

use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use fusegraph::train::BatchError;
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Arc, Mutex};

const B: usize = 4;
const SEQ: usize = 8;

/// Eight ids of a vocabulary of 40 to one of two classes.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Classifier {
    tok: Embedding<40, 2, SEQ>,
    fc: Dense<{ 2 * SEQ }, 2>,
}

/// Eight ids of a vocabulary of 40 to a tag of 4 classes at each position.
#[fusegraph::model(loss = SequenceCrossEntropy<4>, input = u32)]
struct Tagger {
    tok: Embedding<40, 3, SEQ>,
    head: PerPosition<Dense<3, 4>, SEQ>,
}

/// Where a panic was raised and what it said.
#[derive(Debug)]
struct Caught {
    file: String,
    line: u32,
    message: String,
}

/// Serializes the tests of this file: the panic hook is the process's.
static HOOK: Mutex<()> = Mutex::new(());

/// The panic of `f`, recorded by a panic hook (which sees its location) while `f` runs.
fn caught<R>(f: impl FnOnce() -> R) -> Caught {
    let _hook = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let seen: Arc<Mutex<Option<Caught>>> = Arc::default();
    let record = Arc::clone(&seen);
    let previous = panic::take_hook();
    panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let location = info
            .location()
            .expect("a panic of this crate has a location");
        *record.lock().unwrap() = Some(Caught {
            file: location.file().to_string(),
            line: location.line(),
            message,
        });
    }));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(previous);
    assert!(outcome.is_err(), "the call did not panic");
    let caught = seen.lock().unwrap().take();
    caught.expect("the hook saw the panic")
}

/// Checks that `caught` was raised at `line` of this file and said `message`.
fn assert_caught(caught: &Caught, line: u32, message: &str) {
    let at = (caught.file.as_str(), caught.line);
    assert_eq!(at, (file!(), line), "{caught:?}");
    assert_eq!(caught.message, message);
}

/// `batch` samples of ids below 40.
fn ids(batch: usize) -> Vec<u32> {
    (0..batch * SEQ).map(|i| (i * 7 % 40) as u32).collect()
}

#[test]
fn an_id_outside_the_vocabulary_panics_at_the_callers_line_naming_it_as_given() {
    let mut model = Classifier::init(Seed(1));
    let mut step = TrainStep::<Classifier, Adam, B>::new(&model, Adam::default());
    let mut x = ids(B);
    x[3 * SEQ + 7] = u32::MAX;
    let y = [0, 1, 0, 1];
    let expected =
        "sample 3, position 7: token id 4294967295 is outside the vocabulary of 40 ids (0..40)";
    assert_eq!(
        step.try_run(&mut model, &x, &y).unwrap_err().to_string(),
        expected
    );

    let line = line!() + 1;
    let run = caught(|| step.run(&mut model, &x, &y));
    assert_caught(&run, line, expected);

    let line = line!() + 1;
    let predict = caught(|| step.predict(&model, &x).to_vec());
    assert_caught(&predict, line, expected);

    let line = line!() + 1;
    let gradients = caught(|| step.gradients(&mut model, &x, &y));
    assert_caught(&gradients, line, expected);

    // Evaluation counts samples from the first of all it is given.
    let mut many = ids(3 * B);
    many[9 * SEQ + 2] = 40;
    let labels = [0; 3 * B];
    let line = line!() + 1;
    let evaluate = caught(|| step.evaluate(&model, &many, &labels));
    assert_caught(
        &evaluate,
        line,
        "sample 9, position 2: token id 40 is outside the vocabulary of 40 ids (0..40)",
    );
    assert_eq!(step.optimizer().iterations(), 0, "no step ran");
}

#[test]
fn a_label_outside_the_classes_panics_at_the_callers_line_naming_its_sample_and_position() {
    let mut model = Classifier::init(Seed(2));
    let mut step = TrainStep::<Classifier, Adam, B>::new(&model, Adam::default());
    let (x, y) = (ids(3), [1, 0, 2]);
    let line = line!() + 1;
    let run = caught(|| step.run(&mut model, &x, &y));
    let message = "sample 2: label 2 is not a class of 2 (write 0 or 1)";
    assert_caught(&run, line, message);
    let error = step.try_run(&mut model, &x, &y).unwrap_err();
    let label = BatchError::Label {
        sample: 2,
        position: None,
        label: 2,
        classes: 2,
    };
    assert_eq!((error, error.to_string().as_str()), (label, message));

    // A loss with a label per position names the position too.
    let mut tagger = Tagger::init(Seed(3));
    let mut step = TrainStep::<Tagger, Adam, B>::new(&tagger, Adam::default());
    let mut tags: Vec<u32> = (0..2 * SEQ as u32).map(|i| i % 4).collect();
    tags[SEQ + 5] = 7;
    let line = line!() + 1;
    let run = caught(|| step.run(&mut tagger, &x[..2 * SEQ], &tags));
    let message = "sample 1, position 5: label 7 is not a class of 4 (write 0 to 3)";
    assert_caught(&run, line, message);
}
