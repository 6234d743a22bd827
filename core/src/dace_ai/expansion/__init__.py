"""expansion"""
