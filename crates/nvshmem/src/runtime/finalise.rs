//! Finalising a runtime when its last handle drops: every PE agrees that all are finalising,
//! the queued work settles, each layer's state is closed, then NVSHMEM is finalised; a runtime
//! that cannot do that leaves everything as it is for the process to exit with.
use std::{sync::Arc, time::Duration};

use tracing::{debug, warn};

use super::{exchange, exchange::About, RuntimeInner, State, STATE};

impl RuntimeInner {
    /// Whether every PE agrees, within the timeout, that all are finalising (the watchdog
    /// still running, so a peer that died is seen rather than waited for).
    fn agree_to_finalize(&self) -> bool {
        let about = About {
            call: "finalising",
            team: "the world",
        };
        let mine = exchange::entry(exchange::tag::FINALIZE, &[]);
        match self.exchange.gather(
            self.nv,
            &self.health,
            self.world_team,
            self.n_pes,
            about,
            |_| Ok(mine),
        ) {
            Ok(table) => match exchange::same_call("finalising", &table, exchange::tag::FINALIZE) {
                Ok(()) => true,
                Err(e) => {
                    warn!(%e, "NVSHMEM left as it is");
                    false
                }
            },
            Err(e) => {
                warn!(%e, "NVSHMEM left as it is");
                false
            }
        }
    }

    /// Waits, at most the timeout, until no queued work can still use the heap or the control
    /// block: every dropped array's, team's and device module's work, the runtime's own
    /// streams, and NVSHMEM's calls framed on the program's streams. Gives up (false) at once
    /// where some work can never be proved done (its event could not be recorded).
    fn settle(&self) -> bool {
        let mut last = Vec::new();
        for s in [&self.stream, self.exchange.stream()] {
            match s.record_event(None) {
                Ok(e) => last.push(e),
                Err(e) => {
                    warn!(%e, "recording the runtime's last work");
                    return false;
                }
            }
        }
        // What the runtime itself still holds: the scratch, the predefined teams' calls.
        let mut live = self.heap.live_pending();
        if let Some(t) = self.teams.get() {
            live.extend(t.live_pending());
        }
        let start = std::time::Instant::now();
        loop {
            let streams_done = last.iter().all(|e| e.try_is_complete().unwrap_or(false))
                && live.iter_mut().all(|p| p.done());
            let teams_done = self.teams.get().is_none_or(|t| t.settled());
            // NVSHMEM's calls framed on the program's streams (a quiet holds no resource):
            // their frame's last write goes into the control block, freed when this ends.
            let framed_done = !self.health.framed_unfinished();
            if streams_done
                && teams_done
                && framed_done
                && self.heap.settled()
                && crate::device::retired_settled()
            {
                return true;
            }
            if self.health.timeout().is_some_and(|t| start.elapsed() >= t)
                || self.health.failed()
                || super::in_use::some_work_unprovable()
            {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Leaves NVSHMEM, MPI, the context and everything the GPU may still use as they are: the
    /// process exits with them, as `nvshmem_global_exit` would leave them.
    fn abandon(&mut self) {
        if let Some(teams) = self.teams.take() {
            std::mem::forget(teams);
        }
        std::mem::forget(Arc::clone(&self.health));
        std::mem::forget(Arc::clone(&self.stream));
        std::mem::forget(Arc::clone(self.exchange.stream()));
        std::mem::forget(Arc::clone(&self.ctx));
        #[cfg(feature = "mpi")]
        std::mem::forget(self.universe.take());
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = self.ctx.bind_to_thread() {
            warn!(%e, "binding the CUDA context before finalising NVSHMEM");
        }
        // Finalising is collective, and so is everything the layers release: with this PE
        // failing, a peer gone, or the PEs not all finalising, the others may never arrive.
        let finalize = !std::thread::panicking()
            && !self.health.failed()
            && self.agree_to_finalize()
            && self.settle();
        if !finalize {
            *state = State::Failed;
            self.health.stop();
            self.abandon();
            debug!("NVSHMEM left as it is: this PE is panicking or the job has failed");
            return;
        }
        *state = State::Finalized;
        if let Some(teams) = self.teams.take() {
            teams.close(self.nv);
        }
        // Device modules of the program's own that were dropped with work still queued.
        crate::device::release_retired();
        // SAFETY: NVSHMEM was initialised by this runtime; every handle that used it held this
        // runtime alive, so none is left; the work queued on its memory is done (settled).
        unsafe { self.nv.finalize() };
        // SAFETY: the exchange is not used again (this is the runtime's end) and nothing is
        // in flight on its stream (settled).
        unsafe { std::mem::ManuallyDrop::drop(&mut self.exchange) };
        // Stopped last: a peer that dies while NVSHMEM finalises is seen, and the process ended
        // after GRACE, rather than left waiting in NVSHMEM for ever.
        self.health.stop();
        debug!("NVSHMEM finalised");
        // MPI, if we started it, is finalised when `universe` drops, after this.
    }
}
