//! Starting over MPI: MPI itself when the runtime starts it, the communicator's node-local
//! ranks, and rank 0's unique id broadcast over it.
use super::{launcher::Placement, uid, Bootstrap, Runtime, RuntimeBuilder};
use crate::{Error, Result};

impl RuntimeBuilder {
    #[cfg(feature = "mpi")]
    pub(super) fn start_over_communicator<C: mpi::traits::Communicator>(
        self,
        comm: &C,
        universe: Option<mpi::environment::Universe>,
    ) -> Result<Runtime> {
        let (local_rank, local_size) = mpi_node_local(comm);
        let launch = Placement {
            bootstrap: Bootstrap::Mpi,
            rank: Some(comm.rank() as usize),
            size: Some(comm.size() as usize),
            local_rank: Some(local_rank),
            local_size: Some(local_size),
            rendezvous: None,
        };
        let mut exchange = |uid: Option<uid::UidBytes>| mpi_broadcast_uid(comm, uid);
        self.start(launch, Some(&mut exchange), universe)
    }
}

#[cfg(feature = "mpi")]
pub(super) fn start_mpi() -> Result<Option<mpi::environment::Universe>> {
    if mpi::environment::is_initialized() {
        // The program started MPI itself and will finalise it.
        return Ok(None);
    }
    mpi::initialize().map(Some).ok_or(Error::Mpi {
        call: "MPI_Init",
        detail: "MPI could not be initialised".into(),
    })
}

/// This rank's place among the ranks of `comm` on its node (those that share its memory), and
/// their number: the job is on one node when that is `comm`'s size.
#[cfg(feature = "mpi")]
fn mpi_node_local<C: mpi::traits::Communicator>(comm: &C) -> (usize, usize) {
    use mpi::traits::Communicator as _;
    let node = comm.split_shared(comm.rank());
    (node.rank() as usize, node.size() as usize)
}

#[cfg(feature = "mpi")]
fn mpi_broadcast_uid<C: mpi::traits::Communicator>(
    comm: &C,
    uid: Option<uid::UidBytes>,
) -> Result<uid::UidBytes> {
    use mpi::traits::Root;
    let mut bytes = uid.unwrap_or([0; uid::UID_BYTES]);
    comm.process_at_rank(0).broadcast_into(&mut bytes[..]);
    Ok(bytes)
}
