"""An os-ken overlay controller for OpenFlow 1.3, used by
crates/hayate/tests/tunnel_three_hosts.rs: one controller programs every host's switch so
that the VMs of a tenant network reach each other across hosts through VXLAN tunnels, the
tunnel id (VNI) naming the tenant, and tenants stay apart.

The topology comes from a JSON file (the test writes it):

    {"tenants": {VNI: {DPID: {"port": P, "mac": "02:..."}}},
     "tunnels": {DPID: {PEER_DPID: {VNI: PORT}}}}

DPIDs and VNIs are decimal strings. "tenants" says which port of which switch a tenant's VM
is on, "tunnels" which tunnel port of switch DPID reaches PEER_DPID for VNI. On connect each
switch gets, for each tenant with a VM on it:

- from the VM to a known MAC behind peer P: set_field:VNI->tun_id, output to P's tunnel;
- anything else from the VM (broadcast, multicast, unknown): the same to every peer's tunnel;
- from a peer's tunnel with tun_id=VNI: output to the VM.

Nothing else matches, so everything else is dropped (no table-miss flow: the switch runs in
secure fail mode). Errors the switch sends are logged as "OFP error". This file also starts
os-ken itself:

    python overlay.py TOPOLOGY.json PORT [HOST]
"""

import json
import logging
import sys

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class Overlay(app_manager.OSKenApp):
    """Static overlay flows for every switch of the topology."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    TOPOLOGY = {}  # read from the command line

    @staticmethod
    def add_flow(dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=match,
                                      instructions=inst))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        parser = dp.ofproto_parser
        me = str(dp.id)
        tunnels = self.TOPOLOGY["tunnels"].get(me, {})
        flows = 0
        for vni, members in self.TOPOLOGY["tenants"].items():
            local = members.get(me)
            if local is None:
                continue
            set_vni = parser.OFPActionSetField(tunnel_id=int(vni))
            flood = [set_vni]
            for peer, vm in members.items():
                if peer == me:
                    continue
                tun = tunnels[peer][vni]
                out = parser.OFPActionOutput(tun)
                flood.append(out)
                self.add_flow(dp, 10, parser.OFPMatch(in_port=local["port"], eth_dst=vm["mac"]),
                              [set_vni, out])
                self.add_flow(dp, 10, parser.OFPMatch(in_port=tun, tunnel_id=int(vni)),
                              [parser.OFPActionOutput(local["port"])])
                flows += 2
            self.add_flow(dp, 5, parser.OFPMatch(in_port=local["port"]), flood)
            flows += 1
        self.logger.info("switch %016x connected: %d flows", dp.id, flows)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_error(self, ev):
        """Logs every error the switch sends (the test fails on "OFP error")."""
        msg = ev.msg
        self.logger.warning("OFP error type %d code %d for xid %#x: %s", msg.type, msg.code,
                            msg.xid, bytes(msg.data[:64]).hex())


def main():
    with open(sys.argv[1]) as f:
        Overlay.TOPOLOGY = json.load(f)
    port = sys.argv[2] if len(sys.argv) > 2 else "6653"
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    cfg.CONF(args=["--ofp-tcp-listen-port", port, "--ofp-listen-host", host],
             project="os_ken")
    app_manager.AppManager.run_apps([__name__])


if __name__ == "__main__":
    # Run as a script, this module is __main__; os-ken loads apps by module name.
    sys.modules.setdefault("overlay", sys.modules[__name__])
    main()
