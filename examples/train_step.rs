//! One data-parallel training step: every PE computed bf16 gradients on its own data (here:
//! made up, different on every PE); they are averaged over all PEs with an in-place bf16
//! all-reduce (`ReduceOp::Avg`); PE 0 applies the SGD update to the f32 parameters (on the
//! host, to keep the example short) and broadcasts them; every PE then checks that it holds
//! the same parameters as every other and that they are what the host computes.
//!
//! ```sh
//! scripts/run-example.sh train_step              # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/train_step
//! ```
#[path = "common/run.rs"]
mod run;

use anyhow::{ensure, Context};
use nvshmem::half::bf16;
use nvshmem::prelude::*;

/// Parameters of the model (4 MiB of f32).
const PARAMS: usize = 1 << 20;
/// The SGD learning rate.
const LR: f32 = 0.1;
/// The largest error of one bf16 rounding, relative to the value rounded: bf16 keeps 8
/// significant bits, so rounding to the nearest moves a value by at most 2^-8 of it.
const BF16_ROUNDING: f32 = 1.0 / 256.0;

/// PE `pe`'s gradient of parameter `i`, in [-1, 1].
fn gradient(pe: usize, i: usize) -> bf16 {
    bf16::from_f32((i as f32 * 0.001 + pe as f32).sin())
}

/// Parameter `i` before the step, the same on every PE.
fn start_value(i: usize) -> f32 {
    (i % 100) as f32 * 0.01 - 0.5
}

fn main() -> std::process::ExitCode {
    run::main("train_step", train_step)
}

fn train_step() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.stream().clone();

    // Every PE allocates the same arrays, in the same order (allocation is collective).
    let mine: Vec<bf16> = (0..PARAMS).map(|i| gradient(me, i)).collect();
    let mut grads = rt.alloc_from(&mine)?;
    let start: Vec<f32> = (0..PARAMS).map(start_value).collect();
    let mut params = rt.alloc_from(&start)?;
    // PE 0's updated parameters, the broadcast's source (allocated everywhere, as every
    // symmetric array is, but only PE 0's copy is read).
    let mut updated = rt.alloc_zeroed::<f32>(PARAMS)?;
    // Every PE's parameters side by side, to compare them after the broadcast.
    let mut everyone = rt.alloc_zeroed::<f32>(n * PARAMS)?;

    // 1. Average the gradients, in bf16, in place: every PE gets the same mean.
    world.all_reduce_in_place(&mut grads, ReduceOp::Avg, &stream)?;
    let mean = grads.to_vec()?; // waits for the all-reduce

    // Check the mean against the host's, computed exactly (in f64) from the same bf16 inputs.
    // The GPU's mean went through at most n bf16 roundings: n - 1 additions, of partial sums
    // no larger than n * max|g| (max|g|: the largest of the n gradients of that parameter),
    // each off by at most BF16_ROUNDING * n * max|g|, which the division by n shrinks to
    // BF16_ROUNDING * max|g|; and the division itself, of a mean no larger than max|g|.
    // Together: at most n * BF16_ROUNDING * max|g|.
    let mut exact = vec![0.0f32; PARAMS];
    let mut allowed = vec![0.0f32; PARAMS];
    let mut grad_err = 0.0f32;
    for i in 0..PARAMS {
        let g: Vec<f32> = (0..n).map(|p| gradient(p, i).to_f32()).collect();
        exact[i] = (g.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64) as f32;
        let largest = g.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        allowed[i] = n as f32 * BF16_ROUNDING * largest;
        let err = (mean[i].to_f32() - exact[i]).abs();
        ensure!(
            err <= allowed[i],
            "PE {me}: mean gradient {i} is {}, the host's {}: off by more than bf16 rounding",
            mean[i],
            exact[i]
        );
        grad_err = grad_err.max(err);
    }

    // 2. PE 0 applies the SGD step on the host and puts the result in its `updated`.
    if me == 0 {
        let step: Vec<f32> = (0..PARAMS)
            .map(|i| start[i] - LR * mean[i].to_f32())
            .collect();
        updated.copy_from_host(&step)?;
    }
    // 3. Every PE's `params` becomes PE 0's `updated`. (The broadcast is stream-ordered after
    // the copy above, which has finished: copy_from_host waits for it.)
    world.broadcast(0, &updated, &mut params, &stream)?;

    // 4. Everyone holds the same parameters: gather all PEs' copies and compare them bit for
    // bit with mine.
    world.fcollect(&params, &mut everyone, &stream)?;
    let got = params.to_vec()?;
    let all = everyone.to_vec()?;
    for (pe, theirs) in all.chunks(PARAMS).enumerate() {
        ensure!(
            theirs
                .iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "PE {me}: PE {pe}'s parameters differ from mine after the broadcast"
        );
    }
    // ... and they are the host's step from the exact mean: off by at most LR times the
    // mean's error allowed above, plus 1e-6 for f32's own rounding of the update (f32 keeps
    // 24 significant bits: 6e-8 of values below 1).
    let mut param_err = 0.0f32;
    for i in 0..PARAMS {
        let want = start[i] - LR * exact[i];
        let err = (got[i] - want).abs();
        ensure!(
            err <= LR * allowed[i] + 1e-6,
            "PE {me}: parameter {i} is {}, the host's {want}",
            got[i]
        );
        param_err = param_err.max(err);
    }

    println!(
        "PE {me}: averaged {PARAMS} bf16 gradients over {n} PEs: within bf16 rounding of the \
         host's mean (largest difference {grad_err})"
    );
    println!(
        "PE {me}: SGD step (lr {LR}) from PE 0, broadcast: identical on all {n} PEs and within \
         {param_err} of the host's"
    );
    Ok(())
}
