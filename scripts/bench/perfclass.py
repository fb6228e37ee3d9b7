#!/usr/bin/env python3
# scripts/bench/perfclass.py COMMS: `perf script -F comm,ip,sym` of a
# `perf record -g` on standard input; the samples of the processes named
# (comma-separated) classified by the first rule, in the order below,
# that matches a frame of their call chain: the system call or kernel
# path the time was spent under, else user code.  Prints the shares.
# Used by smtpprof.sh.
import collections
import re
import sys

RULES = [
    ('fsync', r'__x64_sys_fsync|__x64_sys_fdatasync|ext4_sync_file'),
    ('file create (inode allocation)', r'ext4_create|__ext4_new_inode'),
    ('link, unlink', r'__x64_sys_linkat|__x64_sys_unlinkat|__x64_sys_renameat'),
    ('open, close, stat, utimens', r'__x64_sys_openat|__x64_sys_close|__x64_sys_newfstatat|'
     r'__x64_sys_fstat|__x64_sys_statx|__x64_sys_utimensat|__x64_sys_ftruncate'),
    ('write, send', r'__x64_sys_write|__x64_sys_sendto|__x64_sys_writev|__x64_sys_sendmsg'),
    ('read, recv', r'__x64_sys_read|__x64_sys_recvfrom|__x64_sys_recvmsg'),
    ('fork', r'__x64_sys_clone|kernel_clone|ret_from_fork'),
    ('exit, wait', r'__x64_sys_exit_group|do_exit|__x64_sys_wait4|do_group_exit'),
    ('exec, dynamic linking', r'__x64_sys_execve|_dl_|do_lookup_x'),
    ('page faults', r'asm_exc_page_fault|exc_page_fault'),
    ('mmap, munmap, brk', r'__x64_sys_mmap|__x64_sys_munmap|__x64_sys_brk|__x64_sys_mprotect'),
    ('poll, futex, scheduler', r'__x64_sys_poll|__x64_sys_ppoll|__x64_sys_futex|schedule'),
    ('accept, connect, socket', r'__x64_sys_accept|__x64_sys_connect|__x64_sys_socket|'
     r'__x64_sys_shutdown|__x64_sys_setsockopt|__x64_sys_getsockopt|__x64_sys_getpeername'),
    ('signals', r'__x64_sys_rt_sig|do_signal|arch_do_signal'),
    ('softirq (loopback TCP)', r'do_softirq|net_rx_action|__napi_poll'),
    ('other system calls', r'do_syscall_64'),
    ('user code', r'.'),
]


def main():
    comms = set(sys.argv[1].split(','))
    rules = [(name, re.compile(rx)) for name, rx in RULES]
    shares = collections.Counter()
    per = collections.Counter()
    comm, frames = None, []

    def flush():
        if comm is None:
            return
        chain = ' '.join(frames)
        for name, rx in rules:
            if rx.search(chain):
                shares[name] += 1
                break
        per[comm] += 1

    for line in sys.stdin:
        if not line.strip():
            continue
        if not line[0].isspace():
            flush()
            frames = []
            c = line.split()[0]
            comm = c if c in comms else None
        elif comm is not None:
            parts = line.split()
            if len(parts) >= 2:
                frames.append(parts[1])
    flush()
    total = sum(per.values())
    if total == 0:
        print('no samples of', ', '.join(sorted(comms)))
        return
    print('samples:', ', '.join('%s %d' % kv for kv in sorted(per.items())))
    for name, n in shares.most_common():
        print('%-34s %5.1f %%' % (name, 100.0 * n / total))


main()
