//! Runs fusegraph on golden reference files (optimizer cases with the built-in optimizers,
//! model cases with models built from their layers) and writes the results in the form
//! `check.py` reads:
//!
//! ```text
//! cargo run --release --example golden -- tests/data/reference/models_keras.json > got.json
//! python3 tests/data/reference/check.py tests/data/reference/models_keras.json got.json
//! ```
//!
//! Several files may be given; their cases go into one output. Skipped cases (unsupported
//! arguments, layers, activations or losses) are named on stderr, one line each with the
//! reason, and left out of the output, where `check.py` reports them missing (its `--case`
//! option checks some cases alone).

use serde_json::{json, Value};
use std::process::ExitCode;

fn main() -> ExitCode {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: golden FILE.json [FILE.json ...] > got.json");
        return ExitCode::from(2);
    }
    let mut cases = Vec::new();
    for file in &files {
        let doc: Value = match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        {
            Ok(doc) => doc,
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let report = fusegraph_golden::run_file(&doc);
        for s in &report.skipped {
            eprintln!("{file}: skipped {}: {}", s.id, s.reason);
        }
        if let Value::Array(ran) = &report.got["cases"] {
            eprintln!(
                "{file}: {} cases ran, {} skipped",
                ran.len(),
                report.skipped.len()
            );
            cases.extend(ran.iter().cloned());
        }
    }
    println!("{}", json!({ "cases": cases }));
    ExitCode::SUCCESS
}
