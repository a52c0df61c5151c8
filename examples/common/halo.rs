//! What examples/halo.rs and examples/halo_device.rs share: the ring and the array each PE
//! owns, the host-initiated exchange of edge cells, and the host's reference to check against.
use anyhow::ensure;
use cudarc::driver::CudaStream;
use nvshmem::prelude::*;
use std::sync::Arc;

/// Elements each PE owns.
pub const CHUNK: usize = 1 << 20;
/// Ghost cells and signal words: index 0 holds the left neighbour's last element, 1 the
/// right neighbour's first.
pub const LEFT: usize = 0;
pub const RIGHT: usize = 1;

/// The left and right neighbours of PE `me` on a ring of `n` (with one PE both are itself,
/// and the puts wrap its own array).
pub fn neighbours(me: usize, n: usize) -> (usize, usize) {
    ((me + n - 1) % n, (me + 1) % n)
}

/// The initial value of global element `g`: a saw-tooth, so that every element differs from
/// its neighbours and a wrong ghost cell shows in the result.
pub fn initial(g: usize) -> f32 {
    ((g * 37) % 101) as f32 / 100.0
}

/// PE `me`'s initial part of the array.
pub fn mine(me: usize) -> Vec<f32> {
    (0..CHUNK).map(|i| initial(me * CHUNK + i)).collect()
}

/// One iteration on the host, over the whole periodic array, with the kernel's arithmetic.
fn smooth_host(u: &[f32]) -> Vec<f32> {
    let n = u.len();
    (0..n)
        .map(|i| 0.25 * u[(i + n - 1) % n] + 0.5 * u[i] + 0.25 * u[(i + 1) % n])
        .collect()
}

/// The host's reference: PE `me`'s part after `iters` iterations over the whole ring of `n`.
pub fn reference(me: usize, n: usize, iters: u64) -> Vec<f32> {
    let mut host: Vec<f32> = (0..n * CHUNK).map(initial).collect();
    for _ in 0..iters {
        host = smooth_host(&host);
    }
    host[me * CHUNK..(me + 1) * CHUNK].to_vec()
}

/// The largest difference between `got` and the host's `want`, which must be at most 1e-6.
/// The same f32 operations in the same order: the results should agree to the last bit (the
/// GPU may fuse a multiply and an add, which cannot change a product by 0.25 or 0.5, as those
/// are exact); 1e-6 leaves room for a compiler that rounds differently.
pub fn compare(got: &[f32], want: &[f32], me: usize, how: &str) -> anyhow::Result<f32> {
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    ensure!(
        worst <= 1e-6,
        "PE {me} ({how}): the smoothed array differs from the host's by up to {worst}"
    );
    Ok(worst)
}

/// Iteration `it`'s exchange, host-initiated and queued on `stream`: `cur`'s first element
/// goes to the left neighbour's right ghost, its last to the right neighbour's left ghost,
/// each by `put_with_signal`, then the neighbours' elements are waited for. Returns where this
/// iteration's `[left, right]` ghosts start in `ghosts`.
///
/// Two sets of ghost cells (4 elements) are used in turn, by iteration parity: a neighbour may
/// be one iteration ahead, and its next put must not overwrite the ghosts my kernel is still
/// reading. It cannot be two ahead: its put for iteration `it + 2` waits for my put of
/// `it + 1`, which my stream issues only after my kernel of iteration `it` has finished.
pub fn exchange(
    rt: &Runtime,
    cur: &SymArray<f32>,
    ghosts: &mut SymArray<f32>,
    arrived: &SymArray<u64>,
    it: u64,
    stream: &Arc<CudaStream>,
) -> anyhow::Result<usize> {
    let (left, right) = neighbours(rt.my_pe(), rt.n_pes());
    let slot = 2 * (it as usize % 2);
    // Each put adds 1 to the signal word of the side it fills.
    rt.put_with_signal(
        &cur.view(..1)?,
        &mut ghosts.view_mut(slot + RIGHT..slot + RIGHT + 1)?,
        arrived.signal(RIGHT)?,
        SignalOp::Add(1),
        left,
        stream,
    )?;
    rt.put_with_signal(
        &cur.view(CHUNK - 1..)?,
        &mut ghosts.view_mut(slot + LEFT..slot + LEFT + 1)?,
        arrived.signal(LEFT)?,
        SignalOp::Add(1),
        right,
        stream,
    )?;
    // Finish this iteration's puts before the next ones start, so that the signals of one side
    // arrive in iteration order (a count of `it` then means iteration `it`'s element is there,
    // not a later one's ahead of it).
    rt.quiet(stream)?;
    // The signals count puts (Add(1)), so after iteration `it` each word reads `it`: the wait is
    // `>= it` and the words are never reset. A reset to 0 would race with the neighbour's next
    // put, which may already be on its way.
    rt.signal_wait_until(arrived.signal(LEFT)?, Cmp::Ge, it, stream)?;
    rt.signal_wait_until(arrived.signal(RIGHT)?, Cmp::Ge, it, stream)?;
    Ok(slot)
}
