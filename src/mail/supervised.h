/*
 * supervised.h: no daemon outlives the `weir run` that started it, as
 * Postfix's daemons do not outlive master.
 *
 * weir run names itself in $WEIR_RUN_PID (SUPERVISED_ENV) for the
 * daemons it starts.  Each daemon, once it has given up root, calls
 * supervised_arm(): the kernel then sends it SIGTERM when weir run dies
 * (PR_SET_PDEATHSIG), however it dies (kill -9, the OOM killer, a crash),
 * and the daemon stops as when weir run stops it (its man page says
 * how: weir-gate syncs its journal, weir-send leaves the queue as it is
 * at every instant, weir-smtpd -l stops listening and lets its sessions
 * finish).  The kernel's rules (prctl(2)) and why they hold here:
 *   - the signal comes when the parent *thread* ends: weir run has one;
 *   - a change of the process's ids clears it: hence after privdrop;
 *   - a set-id exec clears it: the daemons are not set-id, and the call
 *     is made in the daemon, after its exec, anyway;
 *   - the parent may die before the call: getppid() after it tells, and
 *     the daemon then exits at once.
 * Deliverers and weir-queue, forked by the daemons, do not inherit it
 * (fork clears it); they go with their own parents' rules.
 *
 * Trusts: its environment for one pid (a daemon's environment is its
 * invoker's).  Config keys: none.
 */
#ifndef WEIR_SUPERVISED_H
#define WEIR_SUPERVISED_H

#define SUPERVISED_ENV "WEIR_RUN_PID"

/* weir run, before it starts its daemons: name itself to them. */
void supervised_name_self(void);

/* A daemon, after privdrop_daemon(): if weir run started it, SIGTERM when
 * weir run dies (and exit 0 now, with a line, if it died already).
 * Removes $WEIR_RUN_PID from the environment, so that the daemon's own
 * children never take their parent for weir run.  A daemon started
 * otherwise (by hand, by a test) is left as it is. */
void supervised_arm(void);

#endif
