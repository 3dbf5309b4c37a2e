"""device_calls.py — the OpenCL Caffe fork's device calls (enumerate_devices, set_devices,
select_device), which the paper's scripts use, over mpcaffe's device list: a device id is the
index `mpcaffe.devices()` and `mpcaffe devices` show."""

from . import _mpcaffe

_device_list = []  # the ids given to set_devices, in order (the fork's initialised devices)


def enumerate_devices(silent=False):
    """Returns the number of devices; unless `silent`, first prints the fork's listing (totals,
    then per device: id, backend, backend details, vendor, name, global memory in bytes)."""
    found = _mpcaffe.devices()
    if not silent:
        cuda = sum(d["backend"] == "cuda" for d in found)
        print(f"Total devices: {len(found)}")
        print(f"CUDA devices: {cuda}")
        print(f"OpenCL devices: {len(found) - cuda}")
        for d in found:
            backend = "CUDA" if d["backend"] == "cuda" else "OpenCL"
            for label, value in (("Device id", d["index"]), ("Device backend", backend),
                                 ("Backend details", d["platform"]),
                                 ("Device vendor", d["vendor"]), ("Name", d["name"]),
                                 ("Total global memory", d["global_mem_bytes"])):
                print(f"{label + ':':<31}{value}")
    return len(found)


def _check_ids(ids, what):
    known = [d["index"] for d in _mpcaffe.devices()]
    for i in ids:
        if i not in known:
            raise _mpcaffe.DeviceError(f"{what}: there is no device {i} (devices: {known}; see "
                                       "caffe.enumerate_devices())")


def set_devices(device_ids):
    """Makes `device_ids` (an id or a sequence of them) the devices select_device chooses among,
    and builds later nets on the first, as the fork's Caffe::SetDevices does."""
    ids = [int(device_ids)] if isinstance(device_ids, int) else [int(i) for i in device_ids]
    if not ids:
        raise ValueError("set_devices: give at least one device id")
    _check_ids(ids, "set_devices")
    _device_list[:] = ids
    _mpcaffe.set_device(ids[0])


def select_device(device_id, list_id=False):
    """Builds later nets on a device. With list_id, `device_id` is a position in the
    set_devices list (taken modulo its length; -1 keeps the current device); without, it is a
    device id, which must be among set_devices' when that was called."""
    device_id = int(device_id)
    if list_id:
        if device_id == -1:
            return
        ids = _device_list or [d["index"] for d in _mpcaffe.devices()]
        _mpcaffe.set_device(ids[device_id % len(ids)])
        return
    if _device_list and device_id not in _device_list:
        raise _mpcaffe.DeviceError(f"select_device: device {device_id} is not among the devices "
                                   f"given to set_devices ({_device_list})")
    _check_ids([device_id], "select_device")
    _mpcaffe.set_device(device_id)
