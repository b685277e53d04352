"""Reporting a calibration.

- ``report``: writes summary, parameters, URDF, plots and page
- ``units``: units by joint type
- ``exact_urdf``: the calibrated URDF, exactly the model or not written
"""
