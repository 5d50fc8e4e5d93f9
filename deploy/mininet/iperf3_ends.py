#!/usr/bin/python3
"""Mininet Python API example: Xoff switches whose links are shaped by Xoff (bw/delay link
parameters), a ping check and one iperf3 TCP run from the first host to the last.

    sudo deploy/mininet/sandbox.sh /usr/bin/python3 deploy/mininet/iperf3_ends.py \\
        --topo linear,3 --bw 100 --seconds 10

Prints `pingall: N% dropped`, then `iperf3: receiver X Mbit/s, sender Y Mbit/s,
retransmits Z` and each switch's `xoff ctl stats` table.
(Mininet's own `--test iperf` hangs with Debian's iperf 2.1.8, hence iperf3 here.)
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mininet.log import setLogLevel  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.topo import LinearTopo, SingleSwitchTopo  # noqa: E402
from mininet.topolib import TreeTopo  # noqa: E402

from xoff_mininet import XoffSwitch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--topo', default='linear,3',
                    help='single,N | linear,N | tree,DEPTH[,FANOUT] (as mn --topo)')
    ap.add_argument('--bw', type=float, default=100, help='link rate, Mbit/s (Xoff shaper)')
    ap.add_argument('--delay', default=None, help="link delay, e.g. '1ms' (Xoff delay line)")
    ap.add_argument('--seconds', type=int, default=10, help='iperf3 duration')
    ap.add_argument('--switch-opt', action='append', default=[],
                    help='XoffSwitch parameter KEY=VALUE (repeatable), e.g. headroom=dsh')
    a = ap.parse_args()
    setLogLevel('info')

    lopts = {'bw': a.bw}
    if a.delay:
        lopts['delay'] = a.delay
    sopts = {}
    for kv in a.switch_opt:
        k, v = kv.split('=', 1)
        sopts[k] = int(v) if v.isdigit() else v
    kind, _, rest = a.topo.partition(',')
    nums = [int(x.split('=')[-1]) for x in rest.split(',') if x]
    opts = dict(lopts=lopts, sopts=sopts)
    if kind == 'single':
        topo = SingleSwitchTopo(*(nums or [2]), **opts)
    elif kind == 'linear':
        topo = LinearTopo(*(nums or [2]), **opts)
    elif kind == 'tree':
        topo = TreeTopo(*(nums or [2]), **opts)
    else:
        ap.error('--topo %s: use single,N, linear,N or tree,DEPTH[,FANOUT]' % a.topo)
    # The default link class (plain veth, no tc): bw/delay reach XoffSwitch as link params.
    net = Mininet(topo=topo, switch=XoffSwitch, controller=None, waitConnected=True)
    net.start()
    try:
        loss = net.pingAll(timeout=2)
        print('pingall: %g%% dropped' % loss, flush=True)
        first, last = net.hosts[0], net.hosts[-1]
        server = last.popen(['iperf3', '-s', '-1'])
        # Wait until the server listens.
        last.cmd('for i in $(seq 50); do ss -ltn | grep -q ":5201 " && break; sleep 0.1; done')
        out = first.cmd('iperf3 -c %s -t %d --json' % (last.IP(), a.seconds))
        server.terminate()
        server.wait()
        try:
            v = json.loads(out)
            rx = v['end']['sum_received']['bits_per_second'] / 1e6
            tx = v['end']['sum_sent']['bits_per_second'] / 1e6
            rtx = v['end']['sum_sent'].get('retransmits', 0)
            print('iperf3: %s -> %s receiver %.2f Mbit/s, sender %.2f Mbit/s, retransmits %d'
                  % (first.name, last.name, rx, tx, rtx), flush=True)
        except (ValueError, KeyError) as e:
            print('iperf3: no result (%s): %s' % (e, out[-2000:]), flush=True)
        for s in net.switches:
            print(s.stats(), flush=True)
    finally:
        net.stop()


if __name__ == '__main__':
    main()
