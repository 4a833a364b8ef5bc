//! Training without touching the allocator: an inline model and an `EmbeddedStep` whose arena
//! is an array on the stack, under a global allocator that counts.
//!
//! ```text
//! cargo run --release --example no_alloc
//! ```
//!
//! The same code runs in a `#![no_std]` crate without `alloc` (see `embedded/`); here the
//! counting allocator shows that the training loop never asks for memory.

use fusegraph::optim::keras::Adam;
use fusegraph::optim::Fused;
use fusegraph::prelude::*;
use fusegraph::train::EmbeddedStep;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts every allocation of the process.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Parameters inside the struct, within a 16 KiB budget for batches of 8 with Adam, each layer
/// updated during the backward pass.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline, max_bytes = 16384, batch = 8, optimizer = Adam, fused)]
struct Tiny {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

type Step<'a> = EmbeddedStep<'a, Tiny, Adam, 8, Fused>;

fn main() {
    let mut model = Tiny::init(Seed(4));
    let mut arena = [0.0f32; Step::FLOATS];
    let mut step = Step::new(&model, Adam::default().with_lr(0.02), &mut arena)
        .expect("the arena has FLOATS values");
    // One class per pair of features.
    let mut x = [0.0f32; 8 * 8];
    let mut y = [0u32; 8];
    for i in 0..8 {
        y[i] = (i % 4) as u32;
        x[i * 8 + 2 * (i % 4)] = 1.0;
        x[i * 8 + 2 * (i % 4) + 1] = 0.5;
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let first = step.run(&mut model, &x, &y);
    let mut last = first;
    for _ in 0..199 {
        last = step.run(&mut model, &x, &y);
    }
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
    let bytes = Step::BYTES;
    println!(
        "200 Adam steps, loss {first:.4} -> {last:.4}; {allocations} allocations; state: {} bytes \
         (model {} on the stack, arena {} on the stack)",
        bytes.total(),
        std::mem::size_of::<Tiny>(),
        std::mem::size_of_val(&arena)
    );
    assert_eq!(allocations, 0, "the training loop allocated");
    assert!(last < 0.05 * first, "the loss did not go down");
}
