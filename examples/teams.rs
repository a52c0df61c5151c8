//! Teams: the world split into even and odd PEs (`split_strided`), the world in reverse order
//! (`from_pes`, any list of PEs), into thirds by colour and key (`split`, each PE passing its
//! own), the world without PE 0 (`shrink`), and with 4 PEs or more into rows and columns
//! (`split_2d`).
//! On every team each member runs an all-reduce (sum of the members' world PE numbers) and an
//! fcollect (the members' PE numbers, in team order), and checks both; a PE that is not in a
//! team gets `None` from the split and says so.
//!
//! ```sh
//! scripts/run-example.sh teams                   # one PE per GPU through nvshmem-run
//! mpirun -np 4 target/release/examples/teams
//! ```
#[path = "common/run.rs"]
mod run;

use anyhow::{bail, ensure, Context};
use nvshmem::prelude::*;

/// Elements each PE contributes to each collective.
const COUNT: usize = 1000;

fn main() -> std::process::ExitCode {
    run::main("teams", teams)
}

fn teams() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.stream().clone();

    // Every PE allocates the same arrays, whatever teams it is in: allocation is collective
    // over all PEs, not over a team. `all` is long enough for the largest team (the world).
    let src = rt.alloc_from(&[me as i32; COUNT])?;
    let mut sum = rt.alloc_zeroed::<i32>(COUNT)?;
    let mut all = rt.alloc_zeroed::<i32>(n * COUNT)?;

    // Runs and checks both collectives on `team`, which should hold the world PEs `members`,
    // in that order, and be `None` on every other PE.
    let mut check = |name: &str, team: Option<&Team>, members: &[usize]| -> anyhow::Result<()> {
        let Some(team) = team else {
            ensure!(
                !members.contains(&me),
                "PE {me}: the split gave me no team, but I am in {name} {members:?}"
            );
            println!("PE {me}: not in {name} {members:?}");
            return Ok(());
        };
        let Some(index) = members.iter().position(|&pe| pe == me) else {
            bail!("PE {me}: the split gave me a team, but I am not in {name} {members:?}");
        };
        ensure!(
            team.my_pe() == index && team.n_pes() == members.len(),
            "PE {me}: {name} has {} PEs and I am its PE {}; expected {members:?}",
            team.n_pes(),
            team.my_pe()
        );
        let k = members.len();
        // Poison the outputs, so that a collective that writes nothing cannot pass with an
        // earlier team's results; then a barrier over the team, so that no member's fcollect
        // writes into my `all` before I have poisoned it.
        sum.copy_from_host(&[-1; COUNT])?;
        all.copy_from_host(&vec![-1; n * COUNT])?;
        team.barrier(&stream)?;

        team.all_reduce(&src, &mut sum, ReduceOp::Sum, &stream)?;
        team.fcollect(&src, &mut all.view_mut(..k * COUNT)?, &stream)?;

        let want_sum = members.iter().sum::<usize>() as i32;
        let got = sum.to_vec()?; // waits for the stream
        ensure!(
            got.iter().all(|&x| x == want_sum),
            "PE {me}: all_reduce over {name} {members:?} gave {}, expected {want_sum}",
            got[0]
        );
        let got = all.to_vec()?;
        for (j, (block, &pe)) in got.chunks(COUNT).zip(members).enumerate() {
            ensure!(
                block.iter().all(|&x| x == pe as i32),
                "PE {me}: fcollect over {name} {members:?}: block {j} should be PE {pe}'s"
            );
        }
        let order: Vec<i32> = (0..k).map(|j| got[j * COUNT]).collect();
        println!(
            "PE {me}: {name} {members:?}, my index {index}: all_reduce sum {want_sum}, \
             fcollect {order:?}: ok"
        );
        Ok(())
    };

    // Splits are collective over the parent team (here the world): every PE makes every
    // split, with the same arguments, in the same order, and gets `Some` only for its own.
    // Even PEs: world PEs 0, 2, 4, ... (start 0, stride 2).
    let even_pes: Vec<usize> = (0..n).step_by(2).collect();
    let evens = world.split_strided(0, 2, even_pes.len())?;
    check("the even PEs", evens.as_ref(), &even_pes)?;
    // With one PE there are no odd PEs, and a team of none is an error: skipped (every PE
    // skips it alike, as n is the same everywhere).
    if n >= 2 {
        let odd_pes: Vec<usize> = (1..n).step_by(2).collect();
        let odds = world.split_strided(1, 2, odd_pes.len())?;
        check("the odd PEs", odds.as_ref(), &odd_pes)?;
    }

    // Any list, in any order: team index j is the j-th PE listed, so the fcollect comes out
    // in reverse.
    let backwards: Vec<usize> = (0..n).rev().collect();
    let reversed = world.from_pes(&backwards)?;
    check("the world reversed", reversed.as_ref(), &backwards)?;

    // Any partition, as MPI_Comm_split makes it: each PE passes its own colour and key; the
    // PEs of one colour form a team, numbered by key (then by world PE). Here the world PEs
    // modulo 3, each third numbered from its highest PE down.
    let colour = me % 3;
    let third_pes: Vec<usize> = (0..n).filter(|pe| pe % 3 == colour).rev().collect();
    let third = world.split(Some(colour as u32), -(me as i32))?;
    check(&format!("third {colour}"), third.as_ref(), &third_pes)?;

    // The world without PE 0: every PE takes part, PE 0 gets `None`.
    let rest_pes: Vec<usize> = (1..n).collect();
    let rest = world.shrink(&[0])?;
    check("the world without PE 0", rest.as_ref(), &rest_pes)?;

    // A grid of 2 rows: split_2d(xrange) makes row teams of xrange consecutive PEs (the last
    // may be shorter) and column teams of the PEs at the same place in their rows.
    if n >= 4 {
        let xrange = n.div_ceil(2);
        let (row, column) = world.split_2d(xrange)?;
        let (r, c) = (me / xrange, me % xrange);
        let row_pes: Vec<usize> = (r * xrange..n.min((r + 1) * xrange)).collect();
        let column_pes: Vec<usize> = (c..n).step_by(xrange).collect();
        // Every PE is in one row and one column: both are Some here.
        check(&format!("row {r}"), row.as_ref(), &row_pes)?;
        check(&format!("column {c}"), column.as_ref(), &column_pes)?;
    } else if me == 0 {
        println!("PE {me}: rows and columns (split_2d) skipped: they need 4 PEs, there are {n}");
    }
    // Teams made by splits are destroyed when dropped (collectively over their members):
    // here at the end of their scopes, in the same order on every PE.
    Ok(())
}
