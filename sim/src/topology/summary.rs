//! What `dtsim topo show` prints: devices and links by class, bisection bandwidth, diameter.
