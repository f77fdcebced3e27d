"""Plugs or unplugs a VM's vhost-user port through ovsdbapp, the way os-vif's OVS plugin does
for a booting VM (vif_plug_ovs: ensure the bridge, then one transaction that adds the port
and sets its interface's external ids, type, vhost-server-path and MTU request).

Usage: osvif_plug.py DB plug BRIDGE DEV SOCKET | osvif_plug.py DB unplug BRIDGE DEV
Prints, for plug, the interface's ofport, link_state and error once the switch has set
ofport (at most 15 s), as JSON.
"""

import json
import sys
import time
import uuid

from ovsdbapp.backend.ovs_idl import connection
from ovsdbapp.schema.open_vswitch import impl_idl


def main():
    db, action, bridge, dev = sys.argv[1:5]
    idl = connection.OvsdbIdl.from_server(db, "Open_vSwitch")
    api = impl_idl.OvsdbIdl(connection.Connection(idl=idl, timeout=10))
    if action == "unplug":
        api.del_port(dev, bridge=bridge, if_exists=True).execute(check_error=True)
        return
    sock = sys.argv[5]
    api.add_br(bridge, may_exist=True, datapath_type="netdev").execute(check_error=True)
    external_ids = {
        "iface-id": str(uuid.uuid4()),
        "iface-status": "active",
        "attached-mac": "52:54:00:00:00:01",
        "vm-uuid": str(uuid.uuid4()),
    }
    with api.transaction(check_error=True) as txn:
        txn.add(api.add_port(bridge, dev))
        txn.add(
            api.db_set(
                "Interface",
                dev,
                ("external_ids", external_ids),
                ("type", "dpdkvhostuserclient"),
                ("options", {"vhost-server-path": sock}),
            )
        )
        txn.add(api.db_set("Interface", dev, ("mtu_request", 1500)))
    deadline = time.time() + 15
    ofport = []
    while time.time() < deadline:
        ofport = api.db_get("Interface", dev, "ofport").execute(check_error=True)
        if ofport not in ([], None, 0):
            break
        time.sleep(0.1)
    state = api.db_get("Interface", dev, "link_state").execute(check_error=True)
    error = api.db_get("Interface", dev, "error").execute(check_error=True)
    print(json.dumps({"ofport": ofport, "link_state": state, "error": error}))


if __name__ == "__main__":
    main()
