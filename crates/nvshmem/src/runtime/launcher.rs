//! Which launcher started this process, read from the environment.
//!
//! Kept free of side effects (the environment comes in as a function) so that every rule is
//! tested on machines without GPUs.
use std::{fmt, str::FromStr};

use crate::{Error, Result};

/// The variable that overrides detection, with a [`Bootstrap`] name as its value.
///
/// ```no_run
/// use nvshmem::{runtime::BOOTSTRAP_VAR, Bootstrap, Runtime};
/// // One PE, whatever launcher variables the environment holds.
/// std::env::set_var(BOOTSTRAP_VAR, "single");
/// let rt = Runtime::init()?;
/// assert_eq!(rt.info().bootstrap, Bootstrap::Single);
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub const BOOTSTRAP_VAR: &str = "NVSHMEM_RS_BOOTSTRAP";

/// How the PEs find each other when NVSHMEM starts.
///
/// [`Bootstrap::Auto`] reads the environment: `RANK`/`WORLD_SIZE` (as `nvshmem-run` and
/// torchrun set them) mean [`Bootstrap::Env`]; Open MPI's, Slurm's or PMIx's variables mean
/// [`Bootstrap::Mpi`] (or, built without the `mpi` feature, NVSHMEM's PMIx or PMI-2 plugin);
/// Hydra's `PMI_RANK` (`nvshmrun`) means [`Bootstrap::Pmi`]; nothing at all means a single PE.
/// `NVSHMEM_RS_BOOTSTRAP=<name>` overrides the guess.
///
/// ```
/// use nvshmem::Bootstrap;
/// assert_eq!("pmix".parse::<Bootstrap>().unwrap(), Bootstrap::Pmix);
/// assert_eq!(Bootstrap::Env.to_string(), "env");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bootstrap {
    /// Detect from the environment.
    Auto,
    /// MPI (`mpirun`, `srun`): rank 0 of `MPI_COMM_WORLD` makes a unique id and broadcasts it.
    #[cfg(feature = "mpi")]
    Mpi,
    /// NVSHMEM's PMI-1 plugin (`nvshmrun` and other Hydra launchers).
    Pmi,
    /// NVSHMEM's PMI-2 plugin (Slurm's `srun --mpi=pmi2`).
    Pmi2,
    /// NVSHMEM's PMIx plugin (Open MPI's `mpirun`, `srun --mpi=pmix`).
    Pmix,
    /// No launcher: `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` (torchrun's
    /// convention); rank 0 serves the unique id over TCP.
    Env,
    /// One PE, nothing to exchange.
    Single,
}

impl Bootstrap {
    /// Every name [`FromStr`] accepts, for messages.
    ///
    /// ```
    /// use nvshmem::Bootstrap;
    /// for name in ["auto", "pmi", "pmi2", "pmix", "env", "single"] {
    ///     assert!(Bootstrap::NAMES.contains(name));
    ///     assert!(name.parse::<Bootstrap>().is_ok());
    /// }
    /// let e = "slurm".parse::<Bootstrap>().unwrap_err();
    /// assert!(e.to_string().contains(Bootstrap::NAMES));
    /// ```
    pub const NAMES: &'static str = "auto, mpi, pmi, pmi2, pmix, env, single";

    /// The values of `NVSHMEM_BOOTSTRAP_PMI` that select NVSHMEM's own PMI plugin for this
    /// bootstrap (with `NVSHMEM_BOOTSTRAP=PMI`: NVSHMEM takes PMIx and PMI-2 as flavours of
    /// PMI), where NVSHMEM's plugin does the work.
    pub(crate) fn nvshmem_pmi_flavour(self) -> Option<&'static str> {
        match self {
            Bootstrap::Pmi => Some("PMI"),
            Bootstrap::Pmi2 => Some("PMI-2"),
            Bootstrap::Pmix => Some("PMIX"),
            _ => None,
        }
    }
}

impl fmt::Display for Bootstrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bootstrap::Auto => "auto",
            #[cfg(feature = "mpi")]
            Bootstrap::Mpi => "mpi",
            Bootstrap::Pmi => "pmi",
            Bootstrap::Pmi2 => "pmi2",
            Bootstrap::Pmix => "pmix",
            Bootstrap::Env => "env",
            Bootstrap::Single => "single",
        })
    }
}

impl FromStr for Bootstrap {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Bootstrap::Auto,
            #[cfg(feature = "mpi")]
            "mpi" => Bootstrap::Mpi,
            "pmi" => Bootstrap::Pmi,
            "pmi2" => Bootstrap::Pmi2,
            "pmix" => Bootstrap::Pmix,
            "env" => Bootstrap::Env,
            "single" => Bootstrap::Single,
            _ => {
                return Err(Error::Environment {
                    var: BOOTSTRAP_VAR.into(),
                    value: s.into(),
                    reason: format!("expected one of: {}", Bootstrap::NAMES),
                })
            }
        })
    }
}

/// What the environment says about this process's place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The bootstrap to use (never `Auto`).
    pub bootstrap: Bootstrap,
    /// This process's rank in the job, where the launcher says.
    pub rank: Option<usize>,
    /// The number of processes, where the launcher says.
    pub size: Option<usize>,
    /// This process's rank among those on its node, where the launcher says.
    pub local_rank: Option<usize>,
    /// The number of processes on this node, where the launcher says.
    pub local_size: Option<usize>,
    /// Rendezvous address for [`Bootstrap::Env`].
    pub rendezvous: Option<(String, u16)>,
}

impl Placement {
    /// Whether every PE of the job is on this node, as far as the launch shows: one PE; as
    /// many on this node as in the job; or an `env` rendezvous on the loopback address, which
    /// no PE of another node could have reached. False where it cannot tell.
    pub(crate) fn all_on_this_node(&self) -> bool {
        if self.size == Some(1) {
            return true;
        }
        if let (Some(size), Some(local)) = (self.size, self.local_size) {
            return size == local;
        }
        matches!(&self.rendezvous, Some((addr, _)) if is_loopback(addr))
    }

    /// Where the node-local placement (PE `local rank % gpus` on each GPU) gives some GPUs
    /// more PEs than others, and some GPU more than one: the fewest and the most PEs a GPU
    /// gets. NVSHMEM decides at init, on each PE alone, whether its GPU is shared ("MPG"), and
    /// PEs that decide differently take different start-up paths and wait for each other for
    /// ever (3 PEs on 2 GPUs under MPS: the two on GPU 0 say "More than 1 PE per GPU
    /// detected", the one on GPU 1 does not, and `nvshmemx_init_attr` never returns; NVSHMEM
    /// 3.4.5, 2026-11-26). `None` where every GPU in use gets as many PEs as the others, or
    /// where the launch does not say how many PEs the node has.
    pub(crate) fn uneven_sharing(&self, gpus: usize) -> Option<(usize, usize)> {
        let local = self.local_size?;
        if gpus == 0 || local <= gpus || local % gpus == 0 {
            return None;
        }
        Some((local / gpus, local.div_ceil(gpus)))
    }
}

/// NVSHMEM's variable choosing the transport to PEs of other nodes (InfiniBand's `ibrc` by
/// default; `none` for no remote transport).
pub(crate) const REMOTE_TRANSPORT_VAR: &str = "NVSHMEM_REMOTE_TRANSPORT";

/// The value the runtime gives [`REMOTE_TRANSPORT_VAR`] before NVSHMEM starts, if any: `none`
/// when every PE is on this node and the user has not set it. NVSHMEM then opens no network
/// transport it would not use (its peers are all reached through CUDA's peer access), and 3.8
/// prints no `ibrc.cpp: ... no IB devices found` error line per PE on a machine without
/// InfiniBand. Every PE of a job sees the same launch, so all decide alike.
pub(crate) fn remote_transport(
    launch: &Placement,
    user_value: Option<&str>,
) -> Option<&'static str> {
    (user_value.is_none() && launch.all_on_this_node()).then_some("none")
}

/// `localhost` or an address of 127.0.0.0/8 or `::1`.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Variables launchers set for the node-local rank, in the order they are trusted.
const LOCAL_RANK_VARS: &[&str] = &[
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
];

/// Variables launchers set for the number of processes on this node, in the order they are
/// trusted: torchrun's and `nvshmem-run`'s, Open MPI's, Hydra's (MPICH, `nvshmrun`).
const LOCAL_SIZE_VARS: &[&str] = &[
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
];

/// Slurm's node counts of the job step and the job: either at 1 means one node.
const SLURM_NODES_VARS: &[&str] = &[
    "SLURM_STEP_NUM_NODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
];

/// Reads the launch from `env` (a lookup such as `|k| std::env::var(k).ok()`), honouring an
/// explicit `requested` bootstrap over both `NVSHMEM_RS_BOOTSTRAP` and detection.
pub(crate) fn detect(
    requested: Bootstrap,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Placement> {
    let get_usize = |var: &str| -> Result<Option<usize>> {
        match env(var) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<usize>()
                .map(Some)
                .map_err(|_| Error::Environment {
                    var: var.into(),
                    value: v.clone(),
                    reason: "expected a non-negative integer".into(),
                }),
        }
    };
    let bootstrap = match requested {
        Bootstrap::Auto => match env(BOOTSTRAP_VAR) {
            Some(v) => v.parse()?,
            None => Bootstrap::Auto,
        },
        b => b,
    };
    let bootstrap = if bootstrap == Bootstrap::Auto {
        guess(env)
    } else {
        bootstrap
    };

    let mut local_rank = None;
    for var in LOCAL_RANK_VARS {
        if let Some(v) = get_usize(var)? {
            local_rank = Some(v);
            break;
        }
    }
    let (rank, size) = match bootstrap {
        Bootstrap::Env => (get_usize("RANK")?, get_usize("WORLD_SIZE")?),
        Bootstrap::Single => (Some(0), Some(1)),
        _ => (
            first(&[
                get_usize("OMPI_COMM_WORLD_RANK")?,
                get_usize("SLURM_PROCID")?,
                get_usize("PMI_RANK")?,
            ]),
            first(&[
                get_usize("OMPI_COMM_WORLD_SIZE")?,
                get_usize("SLURM_NTASKS")?,
                get_usize("PMI_SIZE")?,
            ]),
        ),
    };
    let mut local_size = None;
    for var in LOCAL_SIZE_VARS {
        if let Some(v) = get_usize(var)? {
            local_size = Some(v);
            break;
        }
    }
    if local_size.is_none() {
        for var in SLURM_NODES_VARS {
            if let Some(nodes) = get_usize(var)? {
                local_size = size.filter(|_| nodes == 1);
                break;
            }
        }
    }
    let mut launch = Placement {
        bootstrap,
        rank,
        size,
        local_rank,
        local_size,
        rendezvous: None,
    };
    if bootstrap == Bootstrap::Env {
        env_launch(&mut launch, env, &get_usize)?;
    }
    if bootstrap == Bootstrap::Single {
        launch.local_rank.get_or_insert(0);
        launch.local_size = Some(1);
    }
    Ok(launch)
}

fn first(values: &[Option<usize>]) -> Option<usize> {
    values.iter().flatten().next().copied()
}

/// Completes and checks a [`Bootstrap::Env`] launch.
fn env_launch(
    launch: &mut Placement,
    env: &dyn Fn(&str) -> Option<String>,
    get_usize: &dyn Fn(&str) -> Result<Option<usize>>,
) -> Result<()> {
    let missing = |var: &str| {
        Error::Bootstrap {
        bootstrap: "env".into(),
        detail: format!("{var} is not set (the env bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)"),
    }
    };
    let rank = launch.rank.ok_or_else(|| missing("RANK"))?;
    let size = launch.size.ok_or_else(|| missing("WORLD_SIZE"))?;
    if size == 0 || rank >= size {
        return Err(Error::Environment {
            var: "RANK".into(),
            value: rank.to_string(),
            reason: format!("must be below WORLD_SIZE={size}, which must be at least 1"),
        });
    }
    if size > 1 {
        let addr = env("MASTER_ADDR").ok_or_else(|| missing("MASTER_ADDR"))?;
        let port = get_usize("MASTER_PORT")?.ok_or_else(|| missing("MASTER_PORT"))?;
        let port = u16::try_from(port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| Error::Environment {
                var: "MASTER_PORT".into(),
                value: port.to_string(),
                reason: "expected a TCP port, 1 to 65535".into(),
            })?;
        launch.rendezvous = Some((addr, port));
    }
    if launch.local_rank.is_none() && get_usize("LOCAL_WORLD_SIZE")? == Some(size) {
        launch.local_rank = Some(rank);
    }
    Ok(())
}

/// The bootstrap the environment points to.
fn guess(env: &dyn Fn(&str) -> Option<String>) -> Bootstrap {
    let has = |v: &str| env(v).is_some();
    if has("RANK") && has("WORLD_SIZE") {
        return Bootstrap::Env;
    }
    let open_mpi = has("OMPI_COMM_WORLD_SIZE");
    let slurm = has("SLURM_PROCID") && has("SLURM_NTASKS");
    let pmix = has("PMIX_RANK");
    if open_mpi || slurm || pmix {
        #[cfg(feature = "mpi")]
        return Bootstrap::Mpi;
        #[cfg(not(feature = "mpi"))]
        return if open_mpi || pmix {
            Bootstrap::Pmix
        } else {
            Bootstrap::Pmi2
        };
    }
    if has("PMI_RANK") && has("PMI_SIZE") {
        return Bootstrap::Pmi;
    }
    Bootstrap::Single
}

#[cfg(test)]
mod tests {
    #[test]
    fn uneven_sharing_is_found_where_some_gpu_has_more_pes() {
        let at = |local_size| Placement {
            bootstrap: Bootstrap::Mpi,
            rank: Some(0),
            size: local_size,
            local_rank: Some(0),
            local_size,
            rendezvous: None,
        };
        // One PE a GPU (some GPUs unused) and whole multiples share evenly.
        for (pes, gpus) in [(1, 2), (2, 2), (3, 4), (4, 2), (8, 2), (6, 3), (8, 1)] {
            assert_eq!(
                at(Some(pes)).uneven_sharing(gpus),
                None,
                "{pes} PEs on {gpus} GPUs"
            );
        }
        assert_eq!(at(Some(3)).uneven_sharing(2), Some((1, 2)));
        assert_eq!(at(Some(5)).uneven_sharing(4), Some((1, 2)));
        assert_eq!(at(Some(7)).uneven_sharing(2), Some((3, 4)));
        // Unknown node size: nothing to judge.
        assert_eq!(at(None).uneven_sharing(2), None);
    }

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn nothing_set_means_one_pe() {
        let l = detect(Bootstrap::Auto, &env_of(&[])).unwrap();
        assert_eq!(l.bootstrap, Bootstrap::Single);
        assert_eq!((l.rank, l.size, l.local_rank), (Some(0), Some(1), Some(0)));
    }

    #[test]
    fn torchrun_variables_mean_env() {
        let e = env_of(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ]);
        let l = detect(Bootstrap::Auto, &e).unwrap();
        assert_eq!(l.bootstrap, Bootstrap::Env);
        assert_eq!((l.rank, l.size, l.local_rank), (Some(3), Some(4), Some(1)));
        assert_eq!(l.rendezvous, Some(("10.0.0.1".to_string(), 29500)));
    }

    #[test]
    fn env_without_rendezvous_is_an_error_naming_the_variable() {
        let e = env_of(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]);
        let err = detect(Bootstrap::Auto, &e).unwrap_err().to_string();
        assert!(err.contains("MASTER_ADDR is not set"), "{err}");
    }

    #[test]
    fn env_rank_beyond_size_is_refused() {
        let e = env_of(&[("RANK", "2"), ("WORLD_SIZE", "2")]);
        let err = detect(Bootstrap::Auto, &e).unwrap_err().to_string();
        assert!(err.contains("must be below WORLD_SIZE=2"), "{err}");
    }

    #[test]
    fn env_bad_port_and_bad_number_are_refused() {
        let e = env_of(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "70000"),
        ]);
        assert!(detect(Bootstrap::Auto, &e)
            .unwrap_err()
            .to_string()
            .contains("MASTER_PORT"));
        let e = env_of(&[("RANK", "x"), ("WORLD_SIZE", "2")]);
        let err = detect(Bootstrap::Auto, &e).unwrap_err().to_string();
        assert!(
            err.contains("RANK=\"x\"") && err.contains("non-negative integer"),
            "{err}"
        );
    }

    #[test]
    fn single_env_pe_needs_no_rendezvous() {
        let l = detect(
            Bootstrap::Auto,
            &env_of(&[("RANK", "0"), ("WORLD_SIZE", "1")]),
        )
        .unwrap();
        assert_eq!(l.rendezvous, None);
    }

    #[test]
    fn open_mpi_and_slurm_are_recognised() {
        let ompi = env_of(&[
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ]);
        let l = detect(Bootstrap::Auto, &ompi).unwrap();
        #[cfg(feature = "mpi")]
        assert_eq!(l.bootstrap, Bootstrap::Mpi);
        #[cfg(not(feature = "mpi"))]
        assert_eq!(l.bootstrap, Bootstrap::Pmix);
        assert_eq!((l.rank, l.size, l.local_rank), (Some(1), Some(2), Some(1)));

        let slurm = env_of(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
        ]);
        let l = detect(Bootstrap::Auto, &slurm).unwrap();
        assert_eq!((l.rank, l.size, l.local_rank), (Some(5), Some(8), Some(1)));
    }

    #[test]
    fn hydra_means_pmi() {
        let e = env_of(&[
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "0"),
        ]);
        let l = detect(Bootstrap::Auto, &e).unwrap();
        assert_eq!(l.bootstrap, Bootstrap::Pmi);
        assert_eq!(l.bootstrap.nvshmem_pmi_flavour(), Some("PMI"));
        assert_eq!(Bootstrap::Pmix.nvshmem_pmi_flavour(), Some("PMIX"));
        assert_eq!(Bootstrap::Env.nvshmem_pmi_flavour(), None);
    }

    #[test]
    fn the_override_wins_and_bad_names_are_refused() {
        let e = env_of(&[("OMPI_COMM_WORLD_SIZE", "2"), (BOOTSTRAP_VAR, "PMIX")]);
        assert_eq!(
            detect(Bootstrap::Auto, &e).unwrap().bootstrap,
            Bootstrap::Pmix
        );
        // An explicit builder choice beats the variable.
        assert_eq!(
            detect(Bootstrap::Pmi2, &e).unwrap().bootstrap,
            Bootstrap::Pmi2
        );
        let e = env_of(&[(BOOTSTRAP_VAR, "carrier-pigeon")]);
        let err = detect(Bootstrap::Auto, &e).unwrap_err().to_string();
        assert!(
            err.contains("carrier-pigeon") && err.contains(Bootstrap::NAMES),
            "{err}"
        );
    }

    /// Whether the runtime would set NVSHMEM_REMOTE_TRANSPORT=none for this environment.
    fn transport_none(pairs: &[(&str, &str)]) -> bool {
        let env = env_of(pairs);
        let launch = detect(Bootstrap::Auto, &env).unwrap();
        let user = env(REMOTE_TRANSPORT_VAR);
        match remote_transport(&launch, user.as_deref()) {
            Some(v) => {
                assert_eq!(v, "none");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_remote_transport_is_off_only_when_every_pe_is_on_this_node() {
        // One PE, with or without a launcher.
        assert!(transport_none(&[]));
        assert!(transport_none(&[("RANK", "0"), ("WORLD_SIZE", "1")]));
        // nvshmem-run and torchrun on one node: as many on this node as in the job.
        let nvshmem_run = [
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        assert!(transport_none(&nvshmem_run));
        // torchrun over two nodes of two.
        let mut two_nodes = nvshmem_run;
        two_nodes[1] = ("WORLD_SIZE", "4");
        assert!(!transport_none(&two_nodes));
        // By hand: unknown node-local size, but a loopback rendezvous is this node's.
        for addr in ["127.0.0.1", "localhost", "::1", "[::1]"] {
            let by_hand = [
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", addr),
                ("MASTER_PORT", "29500"),
            ];
            assert!(transport_none(&by_hand), "{addr}");
        }
        let by_hand_remote = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node7"),
            ("MASTER_PORT", "29500"),
        ];
        assert!(!transport_none(&by_hand_remote));
        // Open MPI: all 2 local, or 2 of 4.
        let ompi = |size: &'static str| {
            [
                ("OMPI_COMM_WORLD_SIZE", size),
                ("OMPI_COMM_WORLD_RANK", "0"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ]
        };
        assert!(transport_none(&ompi("2")));
        assert!(!transport_none(&ompi("4")));
        // Hydra (nvshmrun).
        let hydra = |local: &'static str| {
            [
                ("PMI_RANK", "0"),
                ("PMI_SIZE", "2"),
                ("MPI_LOCALRANKID", "0"),
                ("MPI_LOCALNRANKS", local),
            ]
        };
        assert!(transport_none(&hydra("2")));
        assert!(!transport_none(&hydra("1")));
        // Slurm: its node count.
        let slurm = |nodes: &'static str| {
            [
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "4"),
                ("SLURM_LOCALID", "0"),
                ("SLURM_STEP_NUM_NODES", nodes),
            ]
        };
        assert!(transport_none(&slurm("1")));
        assert!(!transport_none(&slurm("2")));
        // A launch that says nothing of the node: NVSHMEM's default stays.
        assert!(!transport_none(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]));
        // The user's choice always stays, whatever it is.
        let mut chosen = nvshmem_run.to_vec();
        chosen.push((REMOTE_TRANSPORT_VAR, "ucx"));
        assert!(!transport_none(&chosen));
        assert!(!transport_none(&[(REMOTE_TRANSPORT_VAR, "none")]));
    }

    #[test]
    fn bootstrap_names_round_trip() {
        for b in [
            Bootstrap::Pmi,
            Bootstrap::Pmi2,
            Bootstrap::Pmix,
            Bootstrap::Env,
            Bootstrap::Single,
        ] {
            assert_eq!(b.to_string().parse::<Bootstrap>().unwrap(), b);
        }
    }
}
