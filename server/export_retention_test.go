package server

// Sweep runs one janitor pass now (expired credentials and sessions,
// retention), for tests that do not wait for the minute tick.
func Sweep(s *Server) { s.sweep() }
