"""One-step integrators behind one protocol: ``step(state, inputs) -> state``.

Rigid body (state ``models.rigid_body.RigidBodyState``, inputs a held body wrench):
``dqvi.DQVI`` (variational), ``rk4.RK4``, ``adaptive.ScipyAdaptive`` and
``rkmk.RKMK4`` (Lie-group explicit). Coupled/morphing body (state
``models.coupled_body.CoupledBodyState``): ``qvi_left.LeftRectangleQVI`` and
``qvi_midpoint.MidpointQVI``.
"""
