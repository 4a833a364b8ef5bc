//! The data loaders and scalers on the shipped digits set, on small bad inputs (one per error,
//! checking the place each message names), on IDX files written here, and under proptest.

use flate2::{write::GzEncoder, Compression};
use fusegraph::data::{
    idx, Csv, DataError, Dataset, MinMax, NextTokens, Series, Standardize, Vocabulary, Windows,
};
use fusegraph::Seed;
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::error::Error;
use std::io::Write;

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv");
const WORDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/words.txt");

/// The system allocator, counting per thread the bytes allocated and not yet freed, and the
/// most of them at once.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Records `delta` more bytes live on this thread.
fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + delta);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

// SAFETY: every call is passed on to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes `f` holds allocated at once on this thread (beyond what was allocated before
/// it), and its result.
fn peak_allocation<T>(f: impl FnOnce() -> T) -> (usize, T) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    let out = f();
    (PEAK.with(Cell::get) as usize, out)
}

fn digits_text() -> String {
    std::fs::read_to_string(DIGITS).unwrap()
}

fn digits() -> Dataset<u32> {
    Csv::new()
        .label_column("label")
        .classes(10)
        .read_classes(DIGITS)
        .unwrap()
}

/// Row `i` of the digits file (0-based, after the header), read without the loader.
fn digits_row(text: &str, i: usize) -> (u32, Vec<f32>) {
    let line = text.lines().nth(i + 1).unwrap();
    let mut fields = line.split(',').map(|f| f.parse::<u32>().unwrap());
    let label = fields.next().unwrap();
    (label, fields.map(|v| v as f32).collect())
}

/// The message of an error.
fn message<T: std::fmt::Debug>(r: Result<T, DataError>) -> String {
    r.unwrap_err().to_string()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// `header` followed by `zeros` zero bytes, gzip-compressed (without holding the zeros).
fn gzip_zeros(header: &[u8], zeros: usize) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(header).unwrap();
    let chunk = vec![0; zeros.min(1 << 20)];
    for start in (0..zeros).step_by(chunk.len().max(1)) {
        gz.write_all(&chunk[..chunk.len().min(zeros - start)])
            .unwrap();
    }
    gz.finish().unwrap()
}

/// The bit patterns of values, to compare them exactly (NaN included).
fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// An IDX file of type `code` with these dims and raw (big-endian) data bytes.
fn idx_bytes(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, code, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

#[test]
fn digits_load_with_their_values() {
    let data = digits();
    assert_eq!(
        (data.len(), data.features(), data.targets_per_sample()),
        (1797, 64, 1)
    );
    assert!(data.y().iter().all(|&l| l < 10));
    let text = digits_text();
    for i in [0, 1, 2, 17, 900, 1796] {
        let (label, pixels) = digits_row(&text, i);
        assert_eq!(data.sample(i), (&pixels[..], &[label][..]), "row {i}");
    }
    let by_index = Csv::new().label_index(0).read_classes(DIGITS).unwrap();
    assert_eq!(by_index, data);
}

#[test]
fn digits_as_values_with_two_targets() {
    let data = Csv::new()
        .target_columns(&["p63", "label"])
        .read_values(DIGITS)
        .unwrap();
    assert_eq!((data.features(), data.targets_per_sample()), (63, 2));
    let (label, pixels) = digits_row(&digits_text(), 5);
    assert_eq!(data.sample(5).1, &[pixels[63], label as f32]);
    assert_eq!(data.sample(5).0, &pixels[..63]);
}

#[test]
fn csv_errors_name_their_place() {
    let mut lines: Vec<String> = digits_text().lines().map(str::to_owned).collect();
    let mut fields: Vec<&str> = lines[16].split(',').collect();
    fields[4] = "abc";
    lines[16] = fields.join(",");
    let bad = lines[..20].join("\n");
    let csv = Csv::new().label_column("label");
    assert_eq!(
        message(csv.parse_classes(&bad, "digits.csv")),
        r#"digits.csv:17:5: "abc" is not a number"#
    );

    let cases: [(Csv, &str, &str); 7] = [
        (
            Csv::new(),
            "y,a\n1,2\n1,2,3\n",
            "t.csv:3: expected 2 fields, got 3",
        ),
        (
            Csv::new(),
            "y,a\n1,2\n3,\"4\n",
            "t.csv:3:2: a quoted field is not closed before the end of the input",
        ),
        (
            Csv::new().label_column("class"),
            "y,a,b\n1,2,3\n",
            r#"t.csv: no column "class"; the header has: y, a, b"#,
        ),
        (
            Csv::new().label_index(1).delimiter(b';'),
            "a;y\n1.5;2\n0;x\n",
            r#"t.csv:3:2: "x" is not a class label (a non-negative integer)"#,
        ),
        (
            Csv::new().classes(10),
            "y,a\n9,0\n10,0\n",
            "t.csv:3: label 10 is out of range for 10 classes",
        ),
        (Csv::new(), "y,a\n\n", "t.csv: no samples"),
        (
            Csv::new().target_indices(&[0, 1]),
            "y,a\n1,2\n",
            "t.csv: no feature columns: every column is a target",
        ),
    ];
    for (csv, text, expected) in cases {
        assert_eq!(message(csv.parse_classes(text, "t.csv")), expected);
    }
}

#[test]
fn io_errors_keep_their_cause() {
    let err = Csv::new().read_classes("no/such/file.csv").unwrap_err();
    assert!(err.to_string().starts_with("no/such/file.csv: "), "{err}");
    let cause = err
        .source()
        .unwrap()
        .downcast_ref::<std::io::Error>()
        .unwrap();
    assert_eq!(cause.kind(), std::io::ErrorKind::NotFound);
    let err = idx::read("no/such/file.idx").unwrap_err();
    assert!(matches!(err, DataError::Io { .. }), "{err}");
}

#[test]
fn idx_errors_name_their_place() {
    let images = || idx::parse(&idx_bytes(0x08, &[2, 1, 1], &[3, 4]), "im.idx").unwrap();
    let labels = |l: &[u8]| {
        let n = l.len() as u32;
        idx::parse(&idx_bytes(0x08, &[n], l), "lb.idx").unwrap()
    };
    let cases: [(Vec<u8>, &str); 5] = [
        (
            b"GIF89a".to_vec(),
            "t.idx: not an IDX file (starts with 47 49 46 38, expected 00 00 <type> <dims>)",
        ),
        (
            idx_bytes(0x07, &[1], &[0]),
            "t.idx: unsupported IDX element type 0x07 \
             (known: 08 u8, 09 i8, 0b i16, 0c i32, 0d f32, 0e f64)",
        ),
        (
            idx_bytes(0x0D, &[2, 2], &[0; 15]),
            "t.idx: truncated: the header describes 28 bytes, 27 are present",
        ),
        (
            idx_bytes(0x08, &[1], &[0; 2]),
            "t.idx: trailing bytes: the header describes 9 bytes, 10 are present",
        ),
        (vec![], "t.idx: no samples"),
    ];
    for (bytes, expected) in cases {
        assert_eq!(message(idx::parse(&bytes, "t.idx")), expected);
    }
    assert_eq!(
        message(idx::dataset(images(), labels(&[1, 2, 3]), None)),
        "im.idx has 2 images but lb.idx has 3 labels"
    );
    assert_eq!(
        message(idx::dataset(images(), labels(&[1, 12]), Some(10))),
        "lb.idx: item 1: label 12 is out of range for 10 classes"
    );
    assert_eq!(
        message(idx::dataset(images(), images(), None)),
        "im.idx: labels must be one-dimensional u8 (type 0x08), not type 0x08 with dims [2, 1, 1]"
    );
}

#[cfg(feature = "gzip")]
#[test]
fn gzip_errors_keep_their_cause() {
    let gz = gzip(&idx_bytes(0x08, &[2], &[1, 2]));
    let err = idx::parse(&gz[..gz.len() - 1], "t.idx.gz").unwrap_err();
    assert!(matches!(err, DataError::Gzip { .. }), "{err}");
    assert!(err.to_string().starts_with("t.idx.gz: gzip: "), "{err}");
    assert!(err.source().is_some());
}

/// Writes images, labels and an `f32` file through `wrap` (identity or gzip) into a
/// temporary directory and reads them back.
fn idx_round_trip(name: &str, wrap: fn(&[u8]) -> Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("fusegraph-data-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |file: &str, bytes: &[u8]| {
        let path = dir.join(file);
        std::fs::write(&path, wrap(bytes)).unwrap();
        path
    };
    let pixels: Vec<u8> = (0..3 * 4 * 5).map(|i| (i * 37 % 256) as u8).collect();
    let images = write("images", &idx_bytes(0x08, &[3, 4, 5], &pixels));
    let labels = write("labels", &idx_bytes(0x08, &[3], &[7, 0, 9]));
    let data = idx::load(&images, &labels, Some(10)).unwrap();
    assert_eq!((data.len(), data.features()), (3, 20));
    let expected: Vec<f32> = pixels.iter().map(|&p| f32::from(p)).collect();
    assert_eq!(data.x(), &expected[..]);
    assert_eq!(data.y(), &[7, 0, 9]);
    assert_eq!(idx::read(&images).unwrap().dims(), &[3, 4, 5]);

    let values = [1.5f32, -0.0, f32::MAX, 1e-30, -7.25, 3.0];
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let floats = idx::read(write("floats", &idx_bytes(0x0D, &[2, 3], &data))).unwrap();
    assert_eq!(floats.dims(), &[2, 3]);
    assert_eq!(bits(floats.values()), bits(&values));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn idx_files_round_trip() {
    idx_round_trip("plain", <[u8]>::to_vec);
}

#[cfg(feature = "gzip")]
#[test]
fn idx_gzip_files_round_trip() {
    idx_round_trip("gzip", gzip);
}

#[test]
fn min_max_maps_train_to_unit_range_and_test_by_train() {
    let (train, test) = digits().split(0.25, Seed(3));
    let scaler = MinMax::fit(&train);
    let (mut a, mut b) = (train.clone(), test.clone());
    scaler.apply(&mut a);
    scaler.apply(&mut b);
    for j in 0..64 {
        let column = |d: &Dataset<u32>| {
            d.x()
                .iter()
                .skip(j)
                .step_by(64)
                .copied()
                .collect::<Vec<_>>()
        };
        let raw = column(&train);
        let lo = raw.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = raw.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let scaled = column(&a);
        if lo == hi {
            assert!(scaled.iter().all(|&v| v == 0.0), "feature {j}");
        } else {
            assert!(
                scaled.iter().all(|v| (0.0..=1.0).contains(v)),
                "feature {j}"
            );
            assert!(
                scaled.contains(&0.0) && scaled.contains(&1.0),
                "feature {j}"
            );
        }
        let range = if lo == hi { 1.0 } else { hi - lo };
        for (t, s) in column(&test).iter().zip(column(&b)) {
            assert_eq!(s, (t - lo) / range, "feature {j}");
        }
    }
    assert_eq!(a.y(), train.y());
}

#[test]
fn standardize_gives_train_mean_zero_std_one_and_test_by_train() {
    let (train, test) = digits().split(0.25, Seed(4));
    let scaler = Standardize::fit(&train);
    let (mut a, mut b) = (train.clone(), test.clone());
    scaler.apply(&mut a);
    scaler.apply(&mut b);
    let n = train.len() as f64;
    let mut constant = 0;
    for j in 0..64 {
        let column = |d: &Dataset<u32>| {
            d.x()
                .iter()
                .skip(j)
                .step_by(64)
                .map(|&v| f64::from(v))
                .collect::<Vec<_>>()
        };
        let scaled = column(&a);
        let mean = scaled.iter().sum::<f64>() / n;
        let std = (scaled.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(mean.abs() < 1e-6, "feature {j}: mean {mean}");
        if scaler.scale()[j] == 1.0 && column(&train).windows(2).all(|w| w[0] == w[1]) {
            constant += 1;
            assert_eq!(std, 0.0, "feature {j}");
        } else {
            assert!((std - 1.0).abs() < 1e-6, "feature {j}: std {std}");
        }
        let (m, s) = (scaler.mean()[j], scaler.scale()[j]);
        for (t, z) in column(&test).iter().zip(column(&b)) {
            assert_eq!(z, ((t - m) / s) as f32 as f64, "feature {j}");
        }
    }
    assert!(constant > 0, "digits have constant pixels (the corners)");
}

/// `[steps, features]` samples scaled per channel: fitting over the features counts every step,
/// so each channel has mean 0 and standard deviation 1 over all steps of all samples, while the
/// `steps * features` columns apart do not (each step has its own offset here).
#[test]
fn standardize_fits_sequences_per_channel_over_every_step() {
    let (samples, steps, features) = (40, 6, 3);
    let value = |i: usize, t: usize, f: usize| {
        let wave = ((i * 7 + t * 3 + f) % 11) as f32;
        wave * (f + 1) as f32 * 10.0 + (t * 5) as f32 + 100.0 * f as f32
    };
    let x: Vec<f32> = (0..samples)
        .flat_map(|i| (0..steps).flat_map(move |t| (0..features).map(move |f| value(i, t, f))))
        .collect();
    let mut data = Dataset::new(x, vec![0u32; samples], steps * features).unwrap();
    let scaler = Standardize::fit_samples(data.x(), features);
    assert_eq!(scaler.mean().len(), features);
    scaler.apply_samples(data.x_mut());
    let stats = |values: Vec<f64>| {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    };
    for f in 0..features {
        let channel = data
            .x()
            .iter()
            .skip(f)
            .step_by(features)
            .map(|&v| f64::from(v));
        let (mean, std) = stats(channel.collect());
        assert!(
            mean.abs() < 1e-6 && (std - 1.0).abs() < 1e-6,
            "channel {f}: {mean} {std}"
        );
        let raw: Vec<f64> = (0..samples)
            .flat_map(|i| (0..steps).map(move |t| f64::from(value(i, t, f))))
            .collect();
        let (raw_mean, raw_std) = stats(raw);
        assert!((scaler.mean()[f] - raw_mean).abs() < 1e-9 * raw_mean.abs().max(1.0));
        assert!((scaler.scale()[f] - raw_std).abs() < 1e-9 * raw_std);
    }
    let first_step = data
        .x()
        .iter()
        .step_by(steps * features)
        .map(|&v| f64::from(v));
    let (mean, _) = stats(first_step.collect());
    assert!(
        mean < -0.1,
        "step 0 of channel 0 is below the channel's mean: {mean}"
    );
}

/// A vocabulary of the shipped word list saved in a checkpoint's metadata comes back from the
/// loaded file and maps the text to the same ids (and back to it).
#[cfg(feature = "checkpoint")]
#[test]
fn a_vocabulary_round_trips_through_a_checkpoint() {
    use fusegraph::checkpoint;
    use fusegraph::optim::keras::Adam;
    use fusegraph::prelude::{Dense, Mse, TrainStep};

    #[fusegraph::model(loss = Mse)]
    struct Tiny {
        fc: Dense<3, 2>,
    }

    let text = std::fs::read_to_string(WORDS).unwrap();
    let vocabulary = Vocabulary::from_text(&text);
    assert!(vocabulary.chars().contains(&'\n') && vocabulary.chars().contains(&'é'));
    let model = Tiny::init(Seed(1));
    let step = TrainStep::<Tiny, Adam, 2>::new(&model, Adam::default());
    let dir = std::env::temp_dir().join(format!("fusegraph-data-{}-vocab", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lm.safetensors");
    let entry = vocabulary.to_metadata();
    checkpoint::save_with(&path, &model, &step, &[(Vocabulary::METADATA_KEY, &entry)]).unwrap();
    let mut loaded = Tiny::init(Seed(2));
    let meta = checkpoint::load_model(&path, &mut loaded).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let saved = meta.get(Vocabulary::METADATA_KEY).unwrap();
    let restored = Vocabulary::from_metadata(saved).unwrap();
    assert_eq!(restored, vocabulary);
    let ids = restored.encode(&text);
    assert_eq!(ids, vocabulary.encode(&text));
    assert!(ids
        .iter()
        .all(|&id| id >= 2 && (id as usize) < vocabulary.size()));
    assert_eq!(restored.decode(&ids), text);
}

/// A small valid IDX file: a type, 1 to 3 dims of 0 to 4, and random data bytes.
fn idx_file() -> impl Strategy<Value = Vec<u8>> {
    let codes = prop::sample::select(vec![0x08u8, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]);
    (codes, prop::collection::vec(0u32..5, 1..4)).prop_flat_map(|(code, dims)| {
        let size = [1, 1, 0, 2, 4, 4, 8][(code - 0x08) as usize];
        let len = size * dims.iter().product::<u32>() as usize;
        prop::collection::vec(any::<u8>(), len).prop_map(move |data| idx_bytes(code, &dims, &data))
    })
}

/// What spreadsheets and pandas write: quoted headers and numbers, a delimiter and escaped
/// quotes inside quotes, a line break in a quoted header; errors after a quoted line break
/// name the line of their field.
#[test]
fn csv_reads_quoted_fields_as_spreadsheets_write_them() {
    let text =
        "\"label\",\"x,1\",\"the \"\"b\"\"\nfeature\"\r\n\"1\",\"1,5\",\" -2 \"\r\n0,3,\"4\"\r\n";
    let data = Csv::new()
        .label_column("the \"b\"\nfeature")
        .parse_values(text.replace("\"1,5\"", "\"1.5\""), "q.csv")
        .unwrap();
    assert_eq!(data.x(), &[1.0, 1.5, 0.0, 3.0]);
    assert_eq!(data.y(), &[-2.0, 4.0]);
    assert_eq!(
        message(
            Csv::new()
                .label_column("label")
                .parse_classes(text, "q.csv")
        ),
        r#"q.csv:3:2: "1,5" is not a number"#
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn csv_parsers_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        text in "[0-9,;.e+\\- \"\r\nxy]{0,120}",
    ) {
        for input in [&bytes[..], text.as_bytes()] {
            let _ = Csv::new().parse_classes(input, "p");
            let _ = Csv::new().no_header().classes(3).parse_classes(input, "p");
            let _ = Csv::new().no_header().delimiter(b';').target_indices(&[1, 0]).parse_values(input, "p");
            let _ = Csv::new().label_column("y").parse_values(input, "p");
        }
    }

    #[test]
    fn idx_parser_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        code in 0x07u8..0x10,
        ndims in 0u8..4,
    ) {
        let _ = idx::parse(&bytes, "p");
        let mut headed = vec![0, 0, code, ndims];
        headed.extend_from_slice(&bytes);
        if let Ok(images) = idx::parse(&headed, "p") {
            let n = images.dims().first().copied().unwrap_or(0).min(1000);
            let labels = idx::parse(&idx_bytes(0x08, &[n as u32], &vec![1; n]), "l").unwrap();
            let _ = idx::dataset(images.clone(), labels, Some(2));
            let _ = idx::dataset(images.clone(), images, None);
        }
        let _ = idx::parse(&gzip(&headed), "p");
        let mut gz = vec![0x1f, 0x8b];
        gz.extend_from_slice(&bytes);
        let _ = idx::parse(&gz, "p");
    }

    #[test]
    fn every_idx_truncation_is_an_error(file in idx_file()) {
        let images = idx::parse(&file, "p").unwrap();
        let n = images.dims()[0];
        let labels = idx::parse(&idx_bytes(0x08, &[n as u32], &vec![3; n]), "l").unwrap();
        let features: usize = images.dims()[1..].iter().product();
        match idx::dataset(images, labels, Some(4)) {
            Ok(data) => prop_assert_eq!((data.len(), data.features()), (n, features)),
            Err(e) => prop_assert!(features == 0, "{}", e),
        }
        for n in 0..file.len() {
            prop_assert!(idx::parse(&file[..n], "p").is_err(), "plain prefix of {}", n);
        }
        let gz = gzip(&file);
        if cfg!(feature = "gzip") {
            let (a, b) = (idx::parse(&gz, "p").unwrap(), idx::parse(&file, "p").unwrap());
            prop_assert_eq!(a.dims(), b.dims());
            prop_assert_eq!(bits(a.values()), bits(b.values()));
        }
        for n in 0..gz.len() {
            prop_assert!(idx::parse(&gz[..n], "p").is_err(), "gzip prefix of {}", n);
        }
    }

    /// Old spreadsheets end lines in a bare `\r`: any mix of `\n`, `\r\n` and `\r` reads as the
    /// digits do with `\n`.
    #[test]
    fn csv_line_ends_in_any_mix_read_alike(ends in prop::collection::vec(0usize..3, 60)) {
        let text = digits_text();
        let lines: Vec<&str> = text.lines().take(60).collect();
        let with = |end: &dyn Fn(usize) -> &'static str| -> String {
            lines.iter().enumerate().map(|(i, l)| format!("{l}{}", end(i))).collect()
        };
        let read = |text: String| Csv::new().label_column("label").parse_classes(text, "p").unwrap();
        let expected = read(with(&|_| "\n"));
        prop_assert_eq!(expected.len(), 59);
        prop_assert_eq!(&read(with(&|i| ["\n", "\r\n", "\r"][ends[i]])), &expected);
        prop_assert_eq!(&read(with(&|_| "\r")), &expected);
    }

    /// Windows of a series cut in time: each part gives every window that fits in it, at the
    /// stride, reading and predicting its own steps; no test window reads or predicts a step a
    /// training window reads or predicts, and exactly the windows across the cut are left out.
    #[test]
    fn windows_of_a_split_series_never_overlap(
        steps in 1usize..120,
        channels in 1usize..4,
        window in 1usize..12,
        horizon in 1usize..5,
        stride in 1usize..6,
        fraction in 0.0f64..=1.0,
    ) {
        // Each value says its step and channel: 1000 * step + channel.
        let values = (0..steps).flat_map(|t| (0..channels).map(move |c| (1000 * t + c) as f32));
        let series = Series::new(values.collect(), channels).unwrap();
        let (train, test) = series.split_tail(fraction);
        let cut = train.steps();
        let windows = Windows::new(window, horizon).stride(stride).targets(&[channels - 1]);
        let step_of = |v: f32| v as usize / 1000;
        let mut used = [Vec::new(), Vec::new()];
        for ((part, first), used) in [(&train, 0), (&test, cut)].into_iter().zip(&mut used) {
            let fits = part.steps() >= window + horizon;
            match windows.dataset(part) {
                Ok(data) => {
                    prop_assert!(fits);
                    prop_assert_eq!(data.len(), (part.steps() - window - horizon) / stride + 1);
                    for i in 0..data.len() {
                        let start = first + i * stride;
                        let (x, y) = data.sample(i);
                        let read: Vec<usize> = x.iter().map(|&v| step_of(v)).collect();
                        let want: Vec<usize> = (start..start + window).flat_map(|t| vec![t; channels]).collect();
                        prop_assert_eq!(read, want);
                        let predicted: Vec<f32> = (start + window..start + window + horizon)
                            .map(|t| (1000 * t + channels - 1) as f32)
                            .collect();
                        prop_assert_eq!(y, &predicted[..]);
                        used.extend(start..start + window + horizon);
                    }
                }
                Err(err) => {
                    prop_assert!(!fits);
                    let is_short = matches!(err, DataError::SeriesTooShort { .. });
                    prop_assert!(is_short, "{}", err);
                }
            }
        }
        prop_assert!(used[0].iter().all(|&t| t < cut) && used[1].iter().all(|&t| t >= cut));
        if let Ok(whole) = windows.dataset(&series) {
            let across = (0..whole.len())
                .map(|i| i * stride)
                .filter(|&s| s < cut && s + window + horizon > cut)
                .count();
            let parts = [&train, &test].map(|p| windows.dataset(p).map_or(0, |d| d.len()));
            if cut % stride == 0 {
                prop_assert_eq!(parts[0] + parts[1] + across, whole.len());
            }
            prop_assert!(across < window + horizon);
        }
    }

    /// Next-token windows over a text's ids: window `i` reads the `context` ids from
    /// `i * stride` and targets the ids one further, for every start that has a next id; the
    /// rarest characters (fewer than `min_count`) are unknown.
    #[test]
    fn next_token_windows_are_the_text_shifted_by_one(
        text in "[a-e\n é]{1,200}",
        context in 1usize..20,
        stride in 1usize..8,
        min_count in 1usize..4,
    ) {
        let vocabulary = Vocabulary::from_text_min_count(&text, min_count);
        let ids = vocabulary.encode(&text);
        for (c, &id) in text.chars().zip(&ids) {
            let count = text.chars().filter(|&d| d == c).count();
            prop_assert_eq!(id == Vocabulary::UNKNOWN, count < min_count);
        }
        match NextTokens::new(context).stride(stride).dataset(&ids) {
            Ok(data) => {
                let starts: Vec<usize> = (0..ids.len()).step_by(stride).filter(|s| s + context < ids.len()).collect();
                prop_assert_eq!(data.len(), starts.len());
                for (i, &s) in starts.iter().enumerate() {
                    prop_assert_eq!(data.sample(i), (&ids[s..s + context], &ids[s + 1..s + context + 1]));
                }
            }
            Err(err) => {
                prop_assert!(ids.len() <= context);
                prop_assert!(matches!(err, DataError::SeriesTooShort { .. }), "{}", err);
            }
        }
    }

    /// `[steps, features]` columns in any order read time-major, each value from the column
    /// its name puts there, as the same file with its columns in order; checked in order, the
    /// shuffled file is refused unless the shuffle left them in place; a dropped column is
    /// named.
    #[test]
    fn sequence_columns_in_any_order_read_time_major(
        steps in 1usize..6,
        features in 1usize..4,
        rows in 1usize..4,
        seed in any::<u64>(),
        drop in any::<prop::sample::Index>(),
    ) {
        let names: Vec<String> = (0..features).map(|f| format!("ch{f}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let ordered: Vec<(usize, usize)> =
            (0..steps).flat_map(|t| (0..features).map(move |f| (t, f))).collect();
        let mut shuffled = ordered.clone();
        fusegraph::Rng::new(Seed(seed)).shuffle(&mut shuffled);
        let value = |row: usize, (t, f): (usize, usize)| (100 * row + 10 * t + f) as f32;
        let file = |columns: &[(usize, usize)]| {
            let mut text = String::from("y");
            for (t, f) in columns {
                text.push_str(&format!(",s{t:02}_ch{f}"));
            }
            for row in 0..rows {
                text.push_str(&format!("\n{row}"));
                for &column in columns {
                    text.push_str(&format!(",{}", value(row, column)));
                }
            }
            text
        };
        let csv = Csv::new().label_column("y").sequence(steps, &names, "s{t}_{f}");
        let data = csv.parse_classes(file(&shuffled), "p").unwrap();
        let expected: Vec<f32> = (0..rows).flat_map(|r| ordered.iter().map(move |&c| value(r, c))).collect();
        prop_assert_eq!(data.x(), &expected[..]);
        prop_assert_eq!(&csv.parse_classes(file(&ordered), "p").unwrap(), &data);
        let in_order = Csv::new().label_column("y").sequence_in_order(steps, &names, "s{t}_{f}");
        prop_assert_eq!(in_order.parse_classes(file(&shuffled), "p").is_ok(), shuffled == ordered);
        prop_assume!(ordered.len() > 1, "without columns, no column is missing");
        let mut fewer = shuffled.clone();
        let (t, f) = fewer.remove(drop.index(fewer.len()));
        let err = csv.parse_classes(file(&fewer), "p").unwrap_err().to_string();
        prop_assert_eq!(err, format!("p: no column is step {t} of feature \"ch{f}\" (pattern \"s{{t}}_{{f}}\")"));
    }

    #[test]
    fn csv_truncation_errs_or_is_consistent(cut in 0usize..4000, crlf in any::<bool>()) {
        let end = if crlf { "\r\n" } else { "\n" };
        let full: String = digits_text().lines().take(40).map(|l| format!("{l}{end}")).collect();
        let text = &full[..cut.min(full.len())];
        if let Ok(data) = Csv::new().label_column("label").parse_classes(text, "p") {
            prop_assert_eq!(data.features(), 64);
            let rows = text.trim_end().lines().count() - 1;
            prop_assert_eq!(data.len(), rows);
            let whole = digits_text();
            for i in 0..rows {
                let (label, pixels) = digits_row(&whole, i);
                let (x, y) = data.sample(i);
                prop_assert_eq!(y, &[label][..]);
                if i + 1 < rows {
                    prop_assert_eq!(x, &pixels[..]);
                } else {
                    let last: f32 = text.trim_end().rsplit(',').next().unwrap().parse().unwrap();
                    prop_assert_eq!(&x[..63], &pixels[..63]);
                    prop_assert_eq!(x[63], last);
                }
            }
        }
    }
}

/// A short CSV of a wide header over many empty lines holds memory in proportion to its bytes
/// (the header's fields and names), not rows x columns (20 000 x 20 000 values, 1.6 GB, before
/// the fix).
#[test]
fn csv_reserves_no_more_than_its_bytes() {
    let columns = 20_000;
    let mut text = vec!["c"; columns].join(",");
    text.push_str(&"\n".repeat(columns));
    text.push_str("1\n");
    let (peak, parsed) = peak_allocation(|| Csv::new().parse_classes(&text, "wide.csv"));
    assert_eq!(message(parsed), "wide.csv:2: expected 20000 fields, got 0");
    assert!(
        peak < 32 * text.len(),
        "{peak} bytes for {} of text",
        text.len()
    );
}

/// Memory a gzip IDX parse may hold beyond what it keeps: the decompressor's state and one
/// chunk of the buffer.
const GZIP_OVERHEAD: usize = 1 << 20;

/// A small gzip file whose header describes 10 bytes but which decompresses to 64 MiB is
/// refused at the first byte beyond the 10, without holding more than them.
#[cfg(feature = "gzip")]
#[test]
fn gzip_keeps_only_what_the_header_describes() {
    let gz = gzip_zeros(&idx_bytes(0x08, &[2], &[7, 8]), 64 << 20);
    let (peak, parsed) = peak_allocation(|| idx::parse(&gz, "bomb.idx.gz"));
    assert_eq!(
        message(parsed),
        "bomb.idx.gz: gzip: decompresses to more bytes than the header's 10"
    );
    assert!(peak < GZIP_OVERHEAD, "{peak} bytes held");
}

/// A file like the one reported (521 KB of gzip, 512 MiB of zeros after a header describing
/// 18446744065119617037 bytes, dims u32::MAX x u32::MAX, took 710 MB before it was refused),
/// with 16 MiB of zeros: refused after its header, whose size is more than 1032 times the
/// compressed bytes.
#[cfg(feature = "gzip")]
#[test]
fn gzip_header_beyond_what_the_file_can_hold_is_refused_before_inflating() {
    let gz = gzip_zeros(&idx_bytes(0x08, &[u32::MAX, u32::MAX], &[]), 16 << 20);
    let (peak, parsed) = peak_allocation(|| idx::parse(&gz, "bomb.idx.gz"));
    let err = parsed.unwrap_err();
    assert!(
        matches!(
            err,
            DataError::Oversized {
                described: Some(18_446_744_065_119_617_037),
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("bomb.idx.gz: the header's dims [4294967295, 4294967295] describe"),
        "{err}"
    );
    assert!(peak < GZIP_OVERHEAD, "{peak} bytes held");
}

/// An IDX header of random type and dims (small, large or overflowing), followed by `zeros`
/// zero bytes: a compression bomb when the zeros are many more than the header describes.
fn bomb() -> impl Strategy<Value = (Vec<u8>, usize)> {
    let codes = prop::sample::select(vec![0x08u8, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]);
    let dim = prop_oneof![0u32..64, 0u32..5000, Just(u32::MAX), any::<u32>()];
    let zeros = prop_oneof![0usize..4096, 0usize..(2 << 20)];
    (codes, prop::collection::vec(dim, 1..4), zeros)
        .prop_map(|(code, dims, zeros)| (idx_bytes(code, &dims, &[]), zeros))
}

/// The bytes a plain IDX file with this header describes (`None` if more than a u64 counts).
fn described(header: &[u8]) -> Option<u64> {
    let size = [1u64, 1, 0, 2, 4, 4, 8][usize::from(header[2] - 0x08)];
    header[4..]
        .chunks_exact(4)
        .map(|d| u64::from(u32::from_be_bytes(d.try_into().unwrap())))
        .try_fold(size, u64::checked_mul)
        .and_then(|n| n.checked_add(header.len() as u64))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the header describes and however many zeros follow, whole or cut anywhere, a
    /// gzip IDX input is read or refused with a typed error, holding at most twice the bytes it
    /// keeps (the smaller of the described and the decompressed size) plus the decompressor.
    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_bombs_are_refused_within_bounded_memory(
        (header, zeros) in bomb(),
        cut in any::<prop::sample::Index>(),
    ) {
        let gz = gzip_zeros(&header, zeros);
        let plain_len = (header.len() + zeros) as u64;
        let described = described(&header);
        for bytes in [&gz[..], &gz[..cut.index(gz.len())]] {
            let (peak, parsed) = peak_allocation(|| idx::parse(bytes, "p"));
            let kept = described.unwrap_or(u64::MAX).min(plain_len) as usize;
            match parsed {
                Ok(data) => {
                    prop_assert_eq!(Some(plain_len), described);
                    prop_assert!(data.values().iter().all(|&v| v == 0.0));
                    prop_assert!(peak <= 6 * kept + GZIP_OVERHEAD, "{} bytes held", peak);
                }
                Err(err) => {
                    prop_assert!(peak <= 2 * kept + GZIP_OVERHEAD, "{} bytes held: {}", peak, err);
                    match err {
                        DataError::Oversized { described: d, .. } => {
                            prop_assert_eq!(d, described);
                            prop_assert!(d.is_none_or(|d| d > bytes.len() as u64 * idx::MAX_INFLATION));
                        }
                        DataError::Overlong { expected, .. } => {
                            prop_assert_eq!(Some(expected), described);
                            prop_assert!(expected <= bytes.len() as u64 * idx::MAX_INFLATION);
                            prop_assert!(plain_len > expected);
                        }
                        DataError::Truncated { expected, present, .. } => {
                            prop_assert_eq!(expected, described);
                            prop_assert!(present < expected.unwrap());
                        }
                        DataError::Gzip { .. } => prop_assert!(bytes.len() < gz.len()),
                        DataError::Empty { .. } | DataError::BadMagic { .. } => {
                            prop_assert!(bytes.len() < 2);
                        }
                        other => prop_assert!(false, "unexpected {}", other),
                    }
                }
            }
        }
    }
}
