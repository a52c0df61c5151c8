//! Algorithms forced by the user: per runtime ([`ForcedAlgorithms`]), from the builder, at run
//! time ([`Runtime::set_algorithm`]) or from the environment ([`ALGORITHMS_VAR`]).
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{registry, Algorithm, Collective};
use crate::{kernels, Error, Result, Runtime, RuntimeBuilder};

/// The environment variable that forces algorithms, for programs that cannot be rebuilt:
/// `collective=algorithm` pairs separated by commas, e.g.
/// `NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem,gather=rooted_get`. It overrides
/// [`RuntimeBuilder::algorithm`].
///
/// ```
/// assert_eq!(nvshmem::collective::ALGORITHMS_VAR, "NVSHMEM_RS_ALGORITHMS");
/// ```
pub const ALGORITHMS_VAR: &str = "NVSHMEM_RS_ALGORITHMS";

/// The collective layer's state in a runtime: the algorithm forced for each collective.
pub(crate) struct ForcedAlgorithms {
    forced: ForcedTable,
}

impl ForcedAlgorithms {
    /// The algorithm forced for `coll`, if any.
    pub(crate) fn forced(&self, coll: Collective) -> Option<&'static dyn Algorithm> {
        self.forced.get(coll)
    }

    /// What is forced for `coll` now, unresolved: a repeated call compares it with its
    /// plan's without touching the registry.
    #[inline]
    pub(super) fn choice(&self, coll: Collective) -> ForcedChoice {
        self.forced.choice(coll)
    }

    /// The state of a starting runtime, from the builder's forced algorithms, then the
    /// environment's ([`ALGORITHMS_VAR`], which overrides them), and `NVSHMEM_RS_PDL` checked:
    /// judged before NVSHMEM starts, so a bad value never leaves it started.
    pub(crate) fn new(algorithms: &[(Collective, String)]) -> Result<Self> {
        let forced = ForcedTable::default();
        for (coll, name) in algorithms {
            forced
                .set(*coll, Some(name))
                .map_err(|reason| Error::arg("RuntimeBuilder::algorithm", "algorithm", reason))?;
        }
        Error::from_env(ALGORITHMS_VAR, |list| forced.apply(list))?;
        Error::from_env(kernels::PDL_VAR, kernels::parse_pdl)?;
        Ok(ForcedAlgorithms { forced })
    }
}

/// The algorithm forced for each collective: a [`ForcedChoice`] of each.
#[derive(Default)]
pub(crate) struct ForcedTable([AtomicUsize; Collective::ALL.len()]);

/// What is forced for one collective: an index into its registry, plus one; 0 for the
/// automatic choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ForcedChoice(usize);

impl ForcedChoice {
    /// The algorithm forced for `coll` (the collective this was read for), if any.
    pub(super) fn algorithm(self, coll: Collective) -> Option<&'static dyn Algorithm> {
        self.0.checked_sub(1).map(|i| registry(coll)[i])
    }
}

impl ForcedTable {
    pub(crate) fn get(&self, coll: Collective) -> Option<&'static dyn Algorithm> {
        self.choice(coll).algorithm(coll)
    }

    #[inline]
    pub(super) fn choice(&self, coll: Collective) -> ForcedChoice {
        ForcedChoice(self.0[coll.index()].load(Ordering::Relaxed))
    }

    /// Forces the pairs of `list` (`collective=algorithm,...`, as [`ALGORITHMS_VAR`] holds):
    /// the reason for the first that cannot be parsed or names no algorithm of its collective.
    pub(crate) fn apply(&self, list: &str) -> std::result::Result<(), String> {
        for (c, a) in parse_forced(list)? {
            self.set(c, Some(&a))?;
        }
        Ok(())
    }

    pub(super) fn set(
        &self,
        coll: Collective,
        algorithm: Option<&str>,
    ) -> std::result::Result<(), String> {
        let index = match algorithm {
            None | Some("auto") => 0,
            Some(name) => {
                registry(coll)
                    .iter()
                    .position(|a| a.name() == name)
                    .ok_or_else(|| {
                        format!(
                            "{coll} has no algorithm {name:?}; it has auto, {}",
                            coll.algorithms().join(", ")
                        )
                    })?
                    + 1
            }
        };
        self.0[coll.index()].store(index, Ordering::Relaxed);
        Ok(())
    }
}

/// Parses `collective=algorithm` pairs separated by commas.
pub(crate) fn parse_forced(list: &str) -> std::result::Result<Vec<(Collective, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (c, a) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not collective=algorithm"))?;
            let c: Collective = c.parse().map_err(|e: Error| e.to_string())?;
            Ok((c, a.trim().to_string()))
        })
        .collect()
}

impl Runtime {
    /// Forces `coll` to run with the algorithm named `algorithm` (one of
    /// [`Collective::algorithms`]), or restores the automatic choice with `None` or
    /// `Some("auto")`. Takes effect for calls made after it; make it on every PE alike, at the
    /// same point of the program. A forced algorithm that cannot run a call makes that call
    /// fail with [`Error::AlgorithmRefused`], the reason named; so do the algorithms that queue
    /// NVSHMEM's collectives where NVSHMEM 3.4.5 gave wrong results: any of them on a team made
    /// by `nvshmemx_team_init` (a list of PEs that is not an increasing progression), and its
    /// reductions on a team some member of which shares its GPU with other PEs (several PEs a
    /// GPU under MPS). An unknown name is [`Error::InvalidArgument`].
    ///
    /// ```no_run
    /// use nvshmem::collective::Collective;
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.set_algorithm(Collective::Gather, Some("peer_copy"))?;
    /// assert!(rt.set_algorithm(Collective::Gather, Some("carrier_pigeon")).is_err());
    /// rt.set_algorithm(Collective::Gather, None)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn set_algorithm(&self, coll: Collective, algorithm: Option<&str>) -> Result<()> {
        self.forced_algorithms()
            .forced
            .set(coll, algorithm)
            .map_err(|reason| Error::arg("Runtime::set_algorithm", "algorithm", reason))
    }

    /// The algorithm forced for `coll`, if any.
    ///
    /// ```no_run
    /// use nvshmem::collective::Collective;
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.forced_algorithm(Collective::AllReduce), None);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn forced_algorithm(&self, coll: Collective) -> Option<&'static str> {
        self.forced_algorithms().forced.get(coll).map(|a| a.name())
    }
}

impl RuntimeBuilder {
    /// Forces `coll` to run with the algorithm named `algorithm` (one of
    /// [`Collective::algorithms`]); checked when the runtime starts. The environment variable
    /// [`ALGORITHMS_VAR`] overrides it.
    ///
    /// ```no_run
    /// use nvshmem::{collective::Collective, Runtime};
    /// let rt = Runtime::builder()
    ///     .algorithm(Collective::AllReduce, "nvshmem")
    ///     .init()?;
    /// assert_eq!(rt.forced_algorithm(Collective::AllReduce), Some("nvshmem"));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn algorithm(mut self, coll: Collective, algorithm: &str) -> Self {
        self.algorithms.push((coll, algorithm.to_string()));
        self
    }
}
