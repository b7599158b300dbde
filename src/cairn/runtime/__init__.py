"""What drives runs forward in a process: engine, workers, leases and run control."""
