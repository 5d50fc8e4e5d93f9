"""Xoff as a Mininet switch node.

    mn --custom deploy/mininet/xoff_mininet.py --switch xoff --controller none --topo single,3
    mn --custom deploy/mininet/xoff_mininet.py --switch xoff,headroom=dsh,buffer=4MiB \\
       --controller none --link default,bw=100,delay=1ms --topo linear,3

or from Python:

    from xoff_mininet import XoffSwitch
    net = Mininet(topo, switch=XoffSwitch, controller=None)

Each switch writes a one-switch Xoff topology file for its data interfaces (`sN-ethK`; `lo`
is skipped), starts `xoff run` on them in the background (AF_XDP) and waits until its control
socket answers. Xoff learns MAC addresses and floods unknown destinations, so no controller is
needed (and topologies with loops are not supported: see README.md).

Per-port line rate and propagation delay come from the link's `bw` (Mbit/s) and `delay`
parameters when given (`--link default,bw=100,delay=1ms`, `addLink(..., bw=100)`), otherwise
from the switch's `rate`/`delay` parameters. The switch parameters are documented in
`XoffSwitch.__init__` and README.md.

Mininet is a system-python package: run this with /usr/bin/python3 (what `mn` uses).
"""

import inspect
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

from mininet.log import debug, error, warn
from mininet.node import Switch

# `mn --custom` exec()s this file without __file__; the code object still knows its path.
HERE = os.path.dirname(os.path.abspath(inspect.currentframe().f_code.co_filename))

# Flow-control schemes the class knows. `none`: no flow control. `pfc`: IEEE 802.1Qbb on the
# lossless priorities: the MMU (`[switch.buffer]`) raises XOFF/XON for the lossless priority
# groups, Xoff sends PFC frames and honours received ones (`[switch.pfc]`).
SCHEMES = ('none', 'pfc')
HEADROOM_MODES = ('dsh', 'sih', 'hpcc')


def find_xoff():
    """The `xoff` binary: $XOFF_BIN, else `xoff` on PATH, else the repository's release build
    (relative to this file, or to the working directory when `mn --custom` exec()s it)."""
    env = os.environ.get('XOFF_BIN')
    if env:
        return env
    onpath = shutil.which('xoff')
    if onpath:
        return onpath
    for c in (os.path.join(HERE, '..', '..', 'target', 'release', 'xoff'),
              os.path.join(os.getcwd(), 'target', 'release', 'xoff')):
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    raise RuntimeError('xoff binary not found: set XOFF_BIN, put `xoff` on PATH, or run '
                       '`cargo build --release` in the Xoff repository')


def toml_str(s):
    "A TOML basic string."
    return '"' + str(s).replace('\\', '\\\\').replace('"', '\\"') + '"'


def rate_str(v, what):
    """A rate for Xoff: numbers are Mbit/s (as Mininet's `bw`), strings keep their unit."""
    if isinstance(v, bool):
        raise ValueError('%s: %r is not a rate' % (what, v))
    if isinstance(v, (int, float)):
        if v <= 0:
            raise ValueError('%s: rate must be > 0 Mbit/s, got %r' % (what, v))
        return '%gMbit' % v
    s = str(v).strip()
    if not re.match(r'^[0-9.]+(e[0-9]+)?\s*[a-zA-Z/]*$', s):
        raise ValueError('%s: %r is not a rate (e.g. 100, 100Mbit, 10Gbit)' % (what, v))
    return s


_TIME_UNITS = {'': 'us', 's': 's', 'sec': 's', 'secs': 's', 'ms': 'ms', 'msec': 'ms',
               'msecs': 'ms', 'us': 'us', 'usec': 'us', 'usecs': 'us', 'ns': 'ns',
               'nsec': 'ns', 'nsecs': 'ns'}


def time_str(v, what):
    """A delay for Xoff from a netem-style value ('1ms', '10us', '2msec'; bare numbers are
    microseconds, as in tc)."""
    if isinstance(v, bool):
        raise ValueError('%s: %r is not a delay' % (what, v))
    if isinstance(v, (int, float)):
        if v < 0:
            raise ValueError('%s: negative delay %r' % (what, v))
        return '%gus' % v
    m = re.match(r'^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$', str(v))
    if not m or m.group(2).lower() not in _TIME_UNITS:
        raise ValueError('%s: %r is not a delay (e.g. 1ms, 10us)' % (what, v))
    return m.group(1) + _TIME_UNITS[m.group(2).lower()]


def size_bytes(v, what):
    "A size in bytes from a number (bytes) or '16MiB', '4MB', '512KiB'."
    if isinstance(v, bool):
        raise ValueError('%s: %r is not a size' % (what, v))
    if isinstance(v, (int, float)):
        n = int(v)
    else:
        m = re.match(r'^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$', str(v))
        mult = {'': 1, 'b': 1, 'k': 1e3, 'kb': 1e3, 'm': 1e6, 'mb': 1e6, 'g': 1e9, 'gb': 1e9,
                'kib': 1024, 'mib': 1024 ** 2, 'gib': 1024 ** 3}
        if not m or m.group(2).lower() not in mult:
            raise ValueError('%s: %r is not a size (e.g. 16MiB, 4MB, 512KiB)' % (what, v))
        n = int(round(float(m.group(1)) * mult[m.group(2).lower()]))
    if n <= 0:
        raise ValueError('%s: size must be > 0, got %r' % (what, v))
    return n


def pg_list(v, what):
    "Priority groups from [3, 4], 3, '3+4' or '3:4' (commas would split mn's arguments)."
    if isinstance(v, int) and not isinstance(v, bool):
        items = [v]
    elif isinstance(v, (list, tuple)):
        items = list(v)
    else:
        items = [x for x in re.split(r'[+:;/ ]', str(v)) if x]
    try:
        pgs = [int(x) for x in items]
    except ValueError:
        raise ValueError('%s: %r is not a list of priorities 0..7 (e.g. 3+4)' % (what, v))
    if not pgs or any(p < 0 or p > 7 for p in pgs):
        raise ValueError('%s: %r is not a list of priorities 0..7 (e.g. 3+4)' % (what, v))
    return pgs


class XoffSwitch(Switch):
    """Xoff (AF_XDP userspace switch with an ASIC-like MMU) as a Mininet switch.

    Needs no controller (`--controller none` / `controller=None`): it learns MACs and floods."""

    # Where config, log and control socket go unless `rundir=` or $XOFF_MININET_DIR says.
    default_rundir = '/run/xoff/mininet'

    def __init__(self, name, rate='10Gbit', delay='0us', queues=8, queue_limit=None,
                 scheduler=None, buffer=None, headroom=None, lossless=None, scheme='none',
                 alpha_shift=None, workers=1, poll='adaptive', xdp_mode=None, learning=True,
                 rundir=None, xoff=None, start_timeout=15, **params):
        """rate: port rate where the link has no `bw` (numbers: Mbit/s; or '10Gbit')
           delay: propagation delay where the link has no `delay` ('0us', '1ms'; numbers: us)
           queues: data queues per port (1..127)
           queue_limit: tail-drop limit per queue when no MMU is configured ('256KiB')
           scheduler: 'drr' (default) or 'sp'
           buffer: shared buffer size ('16MiB'); enables the MMU (`[switch.buffer]`)
           headroom: 'dsh', 'sih' or 'hpcc'; enables the MMU
           lossless: lossless priority groups, e.g. '3+4' (MMU default: 3 and 4)
           scheme: 'none' or 'pfc' (pfc enables the MMU; see README.md)
           alpha_shift: DT alpha of the lossless pool as 2^-shift
           workers: worker threads of `xoff run`; poll: 'adaptive' or 'busy'
           xdp_mode: None (native, then generic), 'native' or 'generic'
           learning: learn source MACs (True)
           rundir: directory for NAME.toml, NAME.log, NAME.sock
           xoff: path of the xoff binary (default: see find_xoff())"""
        self.xoff = xoff or find_xoff()
        self.rate = rate_str(rate, '%s: rate' % name)
        self.delay = time_str(delay, '%s: delay' % name)
        if isinstance(queues, bool) or not isinstance(queues, int) or not 1 <= queues <= 127:
            raise ValueError('%s: queues=%r: must be an integer 1..127' % (name, queues))
        self.queues = queues
        self.queue_limit = size_bytes(queue_limit, '%s: queue_limit' % name) \
            if queue_limit is not None else None
        if scheduler not in (None, 'drr', 'sp'):
            raise ValueError('%s: scheduler=%r: use drr or sp' % (name, scheduler))
        self.scheduler = scheduler
        scheme = str(scheme).lower()
        if scheme not in SCHEMES:
            raise ValueError('%s: unknown scheme %r: XoffSwitch supports %s (see '
                             'deploy/mininet/README.md)' % (name, scheme, ', '.join(SCHEMES)))
        self.scheme = scheme
        if headroom is not None and str(headroom).lower() not in HEADROOM_MODES:
            raise ValueError('%s: headroom=%r: use one of %s'
                             % (name, headroom, ', '.join(HEADROOM_MODES)))
        self.headroom = str(headroom).lower() if headroom is not None else None
        self.buffer = size_bytes(buffer, '%s: buffer' % name) if buffer is not None else None
        self.lossless = pg_list(lossless, '%s: lossless' % name) if lossless is not None else None
        if alpha_shift is not None and (isinstance(alpha_shift, bool)
                                        or not isinstance(alpha_shift, int)
                                        or not 0 <= alpha_shift <= 16):
            raise ValueError('%s: alpha_shift=%r: must be 0..16' % (name, alpha_shift))
        self.alpha_shift = alpha_shift
        self.mmu = (self.scheme == 'pfc' or self.headroom is not None or self.buffer is not None
                    or self.lossless is not None or self.alpha_shift is not None)
        if poll not in ('adaptive', 'busy'):
            raise ValueError('%s: poll=%r: use adaptive or busy' % (name, poll))
        self.poll = poll
        if xdp_mode not in (None, 'native', 'generic'):
            raise ValueError('%s: xdp_mode=%r: use native or generic' % (name, xdp_mode))
        self.xdp_mode = xdp_mode
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError('%s: workers=%r: must be an integer >= 1' % (name, workers))
        self.workers = workers
        self.learning = bool(learning)
        self.rundir = rundir or os.environ.get('XOFF_MININET_DIR') or self.default_rundir
        self.start_timeout = float(start_timeout)
        self.xoff_pid = None
        Switch.__init__(self, name, **params)
        self.config_path = os.path.join(self.rundir, name + '.toml')
        self.log_path = os.path.join(self.rundir, name + '.log')
        self.sock_path = os.path.join(self.rundir, name + '.sock')

    # -- configuration ----------------------------------------------------------------------

    def data_intfs(self):
        "(port number, Intf) of every data interface, in port order (lo is skipped)."
        return sorted(((self.ports[i], i) for i in self.intfList()
                       if i.name != 'lo' and i is not getattr(self, 'controlIntf', None)),
                      key=lambda pi: pi[0])

    @staticmethod
    def peer(intf):
        "The interface at the other end of `intf`'s link (None if unlinked)."
        link = intf.link
        if link is None:
            return None
        return link.intf2 if link.intf1 is intf else link.intf1

    def port_lines(self, intf):
        "TOML lines of one port: rate/delay from the link's bw/delay params, else defaults."
        p = intf.params or {}
        lines = ['[[switch.port]]', 'name = %s' % toml_str(intf.name),
                 'iface = %s' % toml_str(intf.name)]
        what = '%s: link parameter' % intf.name
        if p.get('bw') is not None:
            lines.append('rate = %s' % toml_str(rate_str(p['bw'], what + ' bw')))
        if p.get('delay') is not None:
            lines.append('delay = %s' % toml_str(time_str(p['delay'], what + ' delay')))
        if p.get('max_queue_size') is not None:
            # netem's limit in packets -> a byte limit per queue of as many full frames.
            lines.append('queue_limit = %d' % (int(p['max_queue_size']) * 1518))
        for k in ('loss', 'jitter'):
            if p.get(k):
                warn('*** %s: link parameter %s=%s is not emulated by Xoff (ignored)\n'
                     % (intf.name, k, p[k]))
        return lines

    def config_text(self):
        "The one-switch Xoff topology file for this switch's current interfaces."
        intfs = self.data_intfs()
        d = ['rate = %s' % toml_str(self.rate), 'delay = %s' % toml_str(self.delay),
             'queues = %d' % self.queues]
        if self.queue_limit is not None:
            d.append('queue_limit = %d' % self.queue_limit)
        if self.scheduler:
            d.append('scheduler = %s' % toml_str(self.scheduler))
        out = ['# Written by deploy/mininet/xoff_mininet.py for Mininet switch %s.' % self.name,
               'name = %s' % toml_str('mininet-' + self.name),
               '', '[[switch]]', 'name = %s' % toml_str(self.name),
               'seed = %d' % (int(self.dpid, 16) & 0xffffffff or 1),
               'learning = %s' % ('true' if self.learning else 'false'),
               'defaults = { %s }' % ', '.join(d)]
        for _, intf in intfs:
            out.append('')
            out += self.port_lines(intf)
        if self.mmu:
            out += ['', '[switch.buffer]']
            if self.buffer is not None:
                out.append('buffer_bytes = %d' % self.buffer)
            if self.headroom is not None:
                out.append('headroom_mode = %s' % toml_str(self.headroom))
            lossless = self.lossless
            if lossless is None and self.scheme == 'pfc':
                lossless = [3, 4]  # the MMU's default, written out to match the PFC mask
            if lossless is not None:
                out.append('lossless_pgs = [%s]' % ', '.join(str(x) for x in lossless))
            if self.alpha_shift is not None:
                out.append('alpha = { shift = %d }' % self.alpha_shift)
        if self.scheme == 'pfc':
            # PFC on the lossless priorities (priority = PG = queue, flowctl's default map).
            out += ['', '[switch.pfc]',
                    'enable_mask = %d' % sum(1 << pg for pg in set(lossless))]
        return '\n'.join(out) + '\n'

    # -- life cycle -------------------------------------------------------------------------

    def start(self, controllers):
        "Write the config, prepare the host ends, start `xoff run`, wait for its socket."
        assert controllers is not None  # Xoff ignores controllers
        intfs = self.data_intfs()
        if not intfs:
            raise Exception('%s: XoffSwitch has no data interfaces' % self.name)
        os.makedirs(self.rundir, exist_ok=True)
        with open(self.config_path, 'w') as f:
            f.write(self.config_text())
        for _, intf in intfs:
            intf.cmd('ip link set dev %s up' % intf.name)
            peer = self.peer(intf)
            if peer is not None and not isinstance(peer.node, Switch):
                # Forwarded frames must carry full checksums: the host stack's partial
                # checksums (CHECKSUM_PARTIAL) are not completed on the AF_XDP path.
                peer.cmd('ethtool -K %s tx off >/dev/null 2>&1' % peer.name)
        try:
            os.unlink(self.sock_path)
        except OSError:
            pass
        args = [self.xoff, 'run', '--config', self.config_path, '--switch', self.name,
                '--ctl', self.sock_path, '--poll', self.poll, '--workers', str(self.workers)]
        if self.xdp_mode:
            args += ['--xdp-mode', self.xdp_mode]
        cmd = ' '.join(shlex.quote(a) for a in args)
        self.cmd('%s </dev/null >%s 2>&1 &' % (cmd, shlex.quote(self.log_path)))
        self.xoff_pid = self.lastPid
        if not self.xoff_pid:
            self.xoff_pid = int(self.cmd('echo $!').strip() or 0) or None
        debug('%s: xoff run pid %s\n' % (self.name, self.xoff_pid))
        deadline = time.time() + self.start_timeout
        while not self.ctl_ok():
            if not self.running() or time.time() > deadline:
                log = self.log_tail()
                self.stop_xoff()
                raise Exception('%s: xoff run did not come up (log %s):\n%s'
                                % (self.name, self.log_path, log))
            time.sleep(0.05)

    def running(self):
        "Whether our `xoff run` process is alive (not exited, not a zombie)."
        if not self.xoff_pid:
            return False
        try:
            with open('/proc/%d/stat' % self.xoff_pid) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
            return state not in ('Z', 'X')
        except (OSError, IndexError):
            return False

    def ctl_request(self, line='stats', timeout=2.0):
        "Sends one request line to the control socket; returns the JSON answer line."
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.sock_path)
            s.sendall(line.encode() + b'\n')
            buf = b''
            while not buf.endswith(b'\n'):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return buf.decode(errors='replace')
        finally:
            s.close()

    def ctl_ok(self):
        try:
            return self.ctl_request().startswith('{')
        except OSError:
            return False

    def connected(self):
        "No controller: connected as soon as the switch answers on its control socket."
        return self.running()

    def ctl(self, *args):
        "Output of `xoff ctl --switch NAME --socket SOCK ARGS...` (e.g. ctl('stats'))."
        p = subprocess.run([self.xoff, 'ctl', '--switch', self.name, '--socket',
                            self.sock_path] + [str(a) for a in args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.stdout.decode(errors='replace')

    def stats(self, json=False):
        "Per-port and per-queue counters as text (or JSON text)."
        return self.ctl('stats', '--json') if json else self.ctl('stats')

    def log_tail(self, n=30):
        try:
            with open(self.log_path) as f:
                return ''.join(f.readlines()[-n:])
        except OSError:
            return ''

    def stop_xoff(self, timeout=10.0):
        """SIGTERM to our xoff run (by PID), SIGKILL after `timeout`; reaps it. Returns the
        exit status (None if it was not running)."""
        pid = self.xoff_pid
        if not pid:
            return None
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.time() + timeout
        while self.running() and time.time() < deadline:
            time.sleep(0.02)
        if self.running():
            error('*** %s: xoff run (pid %d) ignored SIGTERM; killing it\n' % (self.name, pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.time() + 5
            while self.running() and time.time() < deadline:
                time.sleep(0.02)
        self.xoff_pid = None
        status = None
        if self.shell and self.shell.poll() is None and not self.waiting:
            # Reap it in the switch's shell (its parent) and get the exit status.
            out = self.cmd('wait %d 2>/dev/null; echo "xoff-exit=$?"' % pid)
            m = re.search(r'xoff-exit=(\d+)', out)
            status = int(m.group(1)) if m else None
        if status not in (None, 0):
            error('*** %s: xoff run exited with status %s; log %s:\n%s'
                  % (self.name, status, self.log_path, self.log_tail(10)))
        return status

    def stop(self, deleteIntfs=True):
        """Stop `xoff run` (Mininet has usually deleted the links already; Xoff has noticed and
        taken those ports down) and delete the interfaces."""
        self.stop_xoff()
        try:
            os.unlink(self.sock_path)
        except OSError:
            pass
        Switch.stop(self, deleteIntfs)

    def terminate(self):
        self.stop_xoff()
        Switch.terminate(self)


switches = {'xoff': XoffSwitch}
